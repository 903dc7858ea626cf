"""The learner thread (live mode) and checkpoints of explore runs."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import tensorflow as tf

from explorer import cli
from explorer.agent.checkpoint import CheckpointError
from explorer.agent.schedule import UpdateSchedule
from explorer.agent.threaded import LearnerDied, ThreadedLearner
from explorer.config import Config, load
from explorer.core import Step
from explorer.envs.live.env import LiveEnv
from explorer.run.builder import build_agent
from explorer.run.driver import Driver
from explorer.testing.fakes import FakeScreen, RecordingPad
from explorer.timing import IdleWindow

SHAPE = (16, 16, 1)
HANG_S = 300.0  # only a guard against a hang: the tests wait on what they check
SMALL = {"learner.schedule.batch_size": 8, "learner.schedule.warmup_steps": 16, "learner.schedule.update_every": 1, "learner.schedule.replay_mb": 1.0,
         "learner.networks.filters": (4,), "learner.networks.feature": 16, "learner.networks.hidden": 16}


def small_agent(shape=SHAPE, acting_copy=False, settings=None):
    config = Config().replace(**{**SMALL, **(settings or {}), "novelty.signal": "pixel"})
    return build_agent(config, shape, acting_copy=acting_copy)


def moving_screen():
    rng = np.random.default_rng(0)
    return FakeScreen([rng.integers(0, 255, SHAPE, dtype=np.uint8) for _ in range(50)])


def live(agent, threaded, pad, seconds, window=None):
    env = LiveEnv(moving_screen(), pad, stack=3, ring_capacity=16, capture_fps=100, hz=50, watchdog_s=3 / 50,
                  window=window, stall_s=HANG_S, first_frame_timeout_s=HANG_S)  # alarms a loaded machine would set off
    driver = Driver(env, agent.actor)
    driver.before_act(lambda: threaded.sync(agent.actor))
    try:
        return driver.run(max_seconds=seconds)
    finally:
        env.close()


def test_learner_thread_trains_while_the_loop_acts_and_weights_reach_the_acting_copy():
    agent = small_agent(acting_copy=True)
    assert agent.actor.policy_net is not agent.learner.policy_net
    threaded = ThreadedLearner(agent.learner, UpdateSchedule.from_config(Config().replace(**SMALL, **{"learner.schedule.publish_every": 5}).learner, live=True),
                               steps=lambda: agent.actor.steps).start()
    initial = [w.numpy() for w in agent.actor.policy_net.weights]
    compiled = [agent.actor._policy, agent.learner._step, agent.novelty._reward_fn, agent.novelty._reset_fn]
    traces = [f.experimental_get_tracing_count() for f in compiled]
    pad = RecordingPad()
    try:
        runs = [live(agent, threaded, pad, seconds=3.0)]
        deadline = time.monotonic() + HANG_S  # a loaded machine gets more time, not a weaker check
        while (threaded.stats()["updates"] < 5 or threaded.stats()["installed"] < 1 or sum(r.steps for r in runs) < 40) \
                and time.monotonic() < deadline:
            runs.append(live(agent, threaded, pad, seconds=3.0))
    finally:
        threaded.stop()
    assert [f.experimental_get_tracing_count() for f in compiled] == traces  # nothing traced once running
    s = threaded.stats()
    assert s["updates"] >= 5 and s["published"] >= 1 and s["installed"] >= 1, s
    assert sum(r.steps for r in runs) >= 40 and pad.is_neutral  # 150 per run at 50 Hz; lenient for a loaded machine
    # What the learner learned reached the acting copy, and only through installed snapshots.
    acting = [w.numpy() for w in agent.actor.policy_net.weights]
    assert any(not np.array_equal(a, b) for a, b in zip(acting, initial, strict=True))


def test_a_dying_learner_thread_stops_the_run_with_the_pad_neutral(monkeypatch):
    agent = small_agent(acting_copy=True)

    def boom(*args, **kwargs):
        raise FloatingPointError("critic loss is NaN/Inf")

    monkeypatch.setattr(agent.learner, "step", boom)
    threaded = ThreadedLearner(agent.learner, UpdateSchedule.from_config(Config().replace(**SMALL).learner, live=True),
                               steps=lambda: agent.actor.steps).start()
    pad = RecordingPad()
    with pytest.raises(LearnerDied, match="NaN"):  # the run's time outlasts any loaded machine: only the death ends it
        live(agent, threaded, pad, seconds=HANG_S)
    assert pad.is_neutral and len(pad.sent) >= 16
    threaded.stop()


def test_checkpoints_keep_the_latest_and_restore_the_state(tmp_path):
    agent = small_agent()
    rng = np.random.default_rng(1)
    frames = [tf.constant(rng.integers(0, 255, (3, *SHAPE), dtype=np.uint8)) for _ in range(40)]
    for i in range(39):
        step, nxt = Step(frames[i], first=i == 0), Step(frames[i + 1])
        agent.actor.observe(step, agent.actor.act(step), nxt)
    ckpt = agent.checkpointer(tmp_path)
    for step_ in (10, 20, 39):
        ckpt.save(step_)
    assert sorted(p.name for p in tmp_path.glob("state-*")) == ["state-20", "state-39"]
    assert sorted(p.name for p in (tmp_path / "state-39").iterdir()) == ["actor", "adder", "replay", "sampler"]
    assert ckpt.latest.endswith("learner-39")
    fresh = small_agent()
    assert fresh.checkpointer(tmp_path).restore() == 39
    assert fresh.actor.steps == agent.actor.steps == 39 and len(fresh.replay) == len(agent.replay) > 0
    for a, b in zip(agent.learner.actor.weights, fresh.learner.actor.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(CheckpointError, match="no checkpoint"):
        small_agent().checkpointer(tmp_path / "empty").restore()
    with pytest.raises(CheckpointError, match="does not fit(.|\n)*load the settings it was trained with \\(its run has no config.toml"):
        small_agent(settings={"learner.networks.hidden": 24}).checkpointer(tmp_path).restore()
    other_frames = small_agent(shape=(*SHAPE[:2], 3 if SHAPE[2] == 1 else 1))
    with pytest.raises(CheckpointError, match="colour or grey"):  # grey frames against colour ones, or back
        other_frames.checkpointer(tmp_path).restore()


def test_a_full_disk_stops_the_run_with_the_last_checkpoint_kept(tmp_path, monkeypatch, capsys):
    import errno

    import explorer.agent.checkpoint

    args = ["--out", str(tmp_path), "--no-progress", "--set", "game.episode_steps=50", "--set", "learner.schedule.warmup_steps=40",
            "--set", "learner.schedule.batch_size=16", "--set", "learner.networks.filters=[8]", "--set", "learner.networks.hidden=32",
            "--set", "learner.networks.feature=32", "--set", "learner.schedule.replay_mb=8", "--set", "learner.schedule.checkpoint_every=30"]
    savez, calls = explorer.agent.checkpoint.np.savez, []

    def fill_the_disk(path, **arrays):
        calls.append(str(path))
        if len(calls) > 1:  # the first checkpoint fits, the second finds the disk full
            raise OSError(errno.ENOSPC, "No space left on device")
        savez(path, **arrays)

    monkeypatch.setattr(explorer.agent.learner.np, "savez", fill_the_disk)
    assert cli.main(["explore", "--steps", "100", *args]) != 0
    err = capsys.readouterr().err
    assert "could not write the checkpoint of step 60" in err and "No space left on device" in err
    assert "learner-30, is kept" in err and f"--resume {tmp_path}" in err
    assert len(calls) == 2  # the way out did not try again on the full disk
    (run,) = list(tmp_path.iterdir())
    assert sorted(p.name for p in (run / "checkpoints").glob("state-*")) == ["state-30"]  # the half-written one is gone
    assert sorted(p.name for p in (run / "checkpoints" / "state-30").iterdir()) == ["actor", "adder", "replay", "sampler"]
    monkeypatch.setattr(explorer.agent.learner.np, "savez", savez)
    # a run directory from before the stick range: its settings file lacks the range, and resuming says so
    import tomli_w

    from explorer.config import tomllib

    settings = run / "config.toml"
    tree = tomllib.loads(settings.read_text())
    del tree["learner"]["actions"]["action_low"], tree["learner"]["actions"]["action_high"]
    settings.write_text(tomli_w.dumps(tree))
    assert cli.main(["explore", "--resume", str(run), "--steps", "100", "--no-progress"]) == 0
    assert json.loads((run / "summary.json").read_text())["resumed_at"] == 30
    err = capsys.readouterr().err
    assert "predates settings" in err and "learner.actions.action_low = " in err and "learner.actions.action_high = " in err
    assert "learner.actions.action_prior" not in err


def test_explore_resume_continues_where_it_stopped(tmp_path):
    args = ["--out", str(tmp_path), "--no-progress", "--set", "game.episode_steps=50", "--set", "learner.schedule.warmup_steps=40",
            # a batch of 4 decisions of 8 steps (ViZDoom's learner.action_repeat) comes before step 120
            "--set", "learner.schedule.batch_size=4", "--set", "learner.networks.filters=[8]", "--set", "learner.networks.hidden=32",
            "--set", "learner.networks.feature=32", "--set", "learner.schedule.replay_mb=8", "--set", "learner.schedule.checkpoint_every=60"]
    assert cli.main(["explore", "--steps", "120", *args]) == 0
    (run,) = list(tmp_path.iterdir())
    first = json.loads((run / "summary.json").read_text())
    assert first["checkpoint"].endswith("learner-120") and first["updates"] > 0
    assert cli.main(["explore", "--resume", str(run), "--steps", "200", "--no-progress"]) == 0
    second = json.loads((run / "summary.json").read_text())
    assert second["resumed_at"] == 120 and second["steps"] == 80
    assert second["checkpoint"].endswith("learner-200") and second["updates"] > first["updates"]
    assert load(run / "config.toml").run.steps == 200
    with pytest.raises(SystemExit):
        cli.main(["explore", "--resume"])


def test_resumes_that_cannot_work_are_one_line_and_change_nothing(tmp_path, capsys):
    small = ["--no-progress", "--set", "learner.action_repeat=1", "--set", "learner.schedule.warmup_steps=20", "--set", "learner.schedule.batch_size=8", "--set",
             "learner.networks.filters=[4]", "--set", "learner.networks.hidden=16", "--set", "learner.networks.feature=16"]

    def files(run):
        return {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}

    assert cli.main(["explore", "--agent", "random", "--steps", "20", "--out", str(tmp_path / "baseline"), *small]) == 0
    (baseline,) = (tmp_path / "baseline").iterdir()
    before = files(baseline)
    capsys.readouterr()
    assert cli.main(["explore", "--resume", str(baseline), "--steps", "40", "--no-progress"]) == 1
    assert capsys.readouterr().err == (f"explorer: --resume {baseline}: run.agent = 'random' keeps no checkpoint; "
                                       "resume runs of the learning agent (run.agent = explorer). Nothing was changed\n")
    assert files(baseline) == before

    assert cli.main(["explore", "--steps", "30", "--out", str(tmp_path / "learning"), *small]) == 0
    (run,) = (tmp_path / "learning").iterdir()
    data = run / "checkpoints" / "learner-30.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:100])  # the only checkpoint, cut short
    before = files(run)
    capsys.readouterr()
    assert cli.main(["explore", "--resume", str(run), "--steps", "60", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"explorer: no usable checkpoint in {run / 'checkpoints'}: learner-30 (learner-30 is damaged: ")
    assert err.endswith("); nothing can be resumed from it; start a new run\n") and err.count("\n") == 1
    assert files(run) == before


def test_an_idle_window_admits_work_that_fits_and_the_first_work_of_each_wait():
    window = IdleWindow()
    assert not window.enter(0.0, timeout=0.05)  # closed: nothing may start
    window.open(time.monotonic() + 20.0)
    assert window.enter(1.0, timeout=0.05)  # fits
    assert window.enter(5.0, timeout=0.05)  # still fits in what is left
    assert not window.enter(30.0, timeout=0.05)  # does not fit, and this wait was entered already
    window.open(time.monotonic() + 20.0)
    assert window.enter(30.0, timeout=0.05)  # too long for any wait: once per wait, the first thing in it
    assert not window.enter(30.0, timeout=0.05)
    window.close()
    assert not window.enter(0.0, timeout=0.05)


def test_between_ticks_every_update_starts_while_the_loop_waits_for_its_tick(monkeypatch):
    import threading

    import explorer.timing

    reading = threading.local()

    class Clock:
        """explorer.timing's clock, keeping each thread's last reading."""

        def __getattr__(self, name):
            return getattr(time, name)

        @staticmethod
        def monotonic():
            reading.t = time.monotonic()
            return reading.t

    monkeypatch.setattr(explorer.timing, "time", Clock())
    admitted = []  # seconds of the wait left as the window judged them, at each update's admission

    class Watched(IdleWindow):
        def enter(self, need, timeout):
            with self._cond:  # held from the admission to this line: the loop cannot close the window between
                ok = super().enter(need, timeout)
                if ok:
                    admitted.append(self._until - reading.t)
            return ok

    agent = small_agent(acting_copy=True)
    window = Watched()
    starts = []  # updates that started
    step = agent.learner.step

    def watched(*args, **kwargs):
        starts.append(len(admitted))
        return step(*args, **kwargs)

    agent.learner.step = watched
    threaded = ThreadedLearner(agent.learner, UpdateSchedule.from_config(Config().replace(**SMALL, **{"learner.schedule.publish_every": 5}).learner, live=True),
                               steps=lambda: agent.actor.steps, window=window).start()
    pad = RecordingPad()
    try:
        deadline = time.monotonic() + HANG_S
        while (len(starts) < 10 or threaded.stats()["installed"] < 1) and time.monotonic() < deadline:
            live(agent, threaded, pad, seconds=3.0, window=window)
    finally:
        threaded.stop()
    assert len(starts) >= 10 and threaded.stats()["installed"] >= 1, threaded.stats()
    # Each update started after an admission of its own (a thread that started late, on a loaded machine, was
    # still let in while the loop waited), and never while a tick's work ran.
    assert starts == list(range(1, len(starts) + 1)), starts
    assert all(left > 0 for left in admitted), sorted(admitted)[:3]
    assert pad.is_neutral
