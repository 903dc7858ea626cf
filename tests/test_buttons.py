"""Pad buttons as policy outputs: the action layout, the vgamepad backend (the real
``vgamepad.VX360Gamepad`` class, only the uinput device faked), release on every way out,
the engine bridge, the learner's gradient path to the button heads, and sessions."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from explorer.config import (
    Config,
    ConfigError,
    LearnerConfig,
    NetworksConfig,
    PadConfig,
    ScheduleConfig,
    load,
)
from explorer.core import PAD_BUTTONS, Step, action_stats, clamp, neutral, settle
from explorer.envs.live.env import LiveEnv
from explorer.envs.live.pad import neutral_on_exit
from explorer.envs.live.watchdog import Watchdog
from explorer.run.driver import Controls, Driver
from explorer.taps import Taps
from explorer.testing.fakes import FakeScreen

pytest.importorskip("vgamepad.lin.virtual_gamepad", reason="vgamepad needs libevdev2 (apt-get install libevdev2)")

from explorer.envs.live.pad import VGamepadPad  # noqa: E402

SHAPE = (16, 16, 3)


def held(pad: VGamepadPad) -> tuple[int, int, int]:
    """``(button bits, left trigger, right trigger)`` of the real class's report."""
    r = pad.gamepad.report
    return int(r.wButtons), int(r.bLeftTrigger), int(r.bRightTrigger)


A, B = 0x1000, 0x2000  # XUSB_GAMEPAD_A, XUSB_GAMEPAD_B


# ---------------------------------------------------------------- layout

def test_config_names_the_same_buttons_as_the_core():
    from typing import get_args

    from explorer.config import PadButton
    assert get_args(PadButton) == PAD_BUTTONS
    assert not {"start", "back", "guide"} & set(PAD_BUTTONS)  # menus are never the policy's
    assert Config().pad.buttons == ("a",)
    with pytest.raises(Exception, match="lists a more than once"):
        PadConfig(buttons=("a", "b", "a"))
    with pytest.raises(Exception, match="pad.buttons"):
        load(None, ["pad.buttons=['start']"])


def test_settle_sends_buttons_as_pressed_or_released_and_keeps_triggers():
    a = settle(np.array([0.1, -0.2, 0.3, 0.9, 0.2, -0.7, 0.4], np.float32), ("a", "b", "rt"))
    np.testing.assert_allclose(a, [0.1, -0.2, 0.3, 0.9, 1.0, -1.0, 0.4])
    assert settle(np.array([0, 0, 0, 0, 0.0]), ("a",))[4] == -1.0  # exactly 0 is not pressed
    np.testing.assert_array_equal(neutral(("a", "rt")), np.zeros(6))
    np.testing.assert_array_equal(clamp([2, 0, 0, 0, np.nan, -5]), [1, 0, 0, 0, 0, -1])  # NaN never presses
    stats = action_stats(np.array([[0.5, 0, 0, 1, 1, -1], [-0.5, 0, 0, 1, -1, -1]]), ("a", "b"))
    assert stats["action/mean_camera_x"] == 0 and stats["action/abs_camera_x"] == 0.5
    assert stats["action/pressed_a"] == 0.5 and stats["action/pressed_b"] == 0.0


# ---------------------------------------------------------------- the vgamepad backend

def test_buttons_and_triggers_go_through_the_real_vx360_api(fake_uinput):
    pad = VGamepadPad(PadConfig(buttons=("a", "b", "rt")))
    dev = fake_uinput[0]
    pad.send(np.array([0.5, 0, 0, 1.0, 1.0, -1.0, 0.6]))
    assert held(pad) == (A, 0, round(0.6 * 255))
    ev = dev.batches[-1]
    assert ev["BTN_SOUTH"] == 1 and ev["BTN_EAST"] == 0 and ev["ABS_RZ"] == round(0.6 * 255)
    pad.send(np.array([0.5, 0, 0, 1.0, -1.0, 1.0, -0.3]))  # A released, B pressed, a trigger below 0 rests
    assert held(pad) == (B, 0, 0)
    assert dev.batches[-1]["BTN_SOUTH"] == 0 and dev.batches[-1]["BTN_EAST"] == 1
    pad.send(np.array([0.5, 0, 0, 1.0]))  # the sticks alone release every button
    assert held(pad) == (0, 0, 0)
    pad.send(np.array([0, 0, 0, 0, np.nan, np.nan, np.nan]))
    assert held(pad) == (0, 0, 0)


def test_neutral_and_close_release_every_button_and_trigger(fake_uinput):
    pad = VGamepadPad(PadConfig(buttons=("a", "lt", "rt")))
    pad.send(np.array([1.0, 1, 1, 1, 1, 1, 1]))
    assert held(pad) == (A, 255, 255)
    pad.neutral()
    assert held(pad) == (0, 0, 0)
    ev = fake_uinput[0].batches[-1]
    assert ev["BTN_SOUTH"] == 0 and ev["ABS_Z"] == 0 and ev["ABS_RZ"] == 0 and ev["ABS_X"] == 0
    pad.send(np.array([1.0, 1, 1, 1, 1, 1, 1]))
    pad.close()
    assert held(pad) == (0, 0, 0)


def test_buttons_are_released_on_normal_end_and_on_exception(fake_uinput):
    pad = VGamepadPad(PadConfig(buttons=("a", "rt")))
    with neutral_on_exit(pad):
        pad.send(np.array([0, 0, 0, 1.0, 1.0, 1.0]))
        assert held(pad)[0] == A
    assert held(pad) == (0, 0, 0)
    with pytest.raises(ZeroDivisionError), neutral_on_exit(pad):
        pad.send(np.array([0, 0, 0, 1.0, 1.0, 1.0]))
        1 / 0  # noqa: B018
    assert held(pad) == (0, 0, 0)


def test_the_watchdog_releases_the_buttons_of_a_stalled_loop(fake_uinput):
    pad = VGamepadPad(PadConfig(buttons=("a", "rt")))
    pad.send(np.array([0, 0, 0, 1.0, 1.0, 0.5]))
    assert held(pad)[0] == A
    # Started after the last send and never fed: however slow the machine, it can trip once only.
    dog = Watchdog(pad, timeout_s=0.1).start()
    try:
        deadline = time.monotonic() + 5
        while held(pad) != (0, 0, 0) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert held(pad) == (0, 0, 0) and dog.trips == 1
    finally:
        dog.stop()


class PressingActor:
    """Walks forward holding A and pulling RT; counts its actions."""

    def __init__(self, on_act=None):
        self.acted = 0
        self.on_act = on_act

    def act(self, step: Step) -> np.ndarray:
        if self.on_act is not None:
            self.on_act(self.acted)
        self.acted += 1
        return np.array([0, 0, 0, 1.0, 1.0, 0.8], np.float32)

    def observe(self, step, action, next_step):
        return {}


def test_pause_releases_the_buttons_while_paused(fake_uinput):
    pad = VGamepadPad(PadConfig(buttons=("a", "rt")))
    env = LiveEnv(FakeScreen.counting(SHAPE), pad, stack=3, ring_capacity=16, capture_fps=100, hz=50)
    controls = Controls()
    seen: list[tuple[int, int, int]] = []

    def script(i):
        if i == 5:
            assert held(pad)[0] == A  # pressed while acting
            controls.toggle_pause()
            threading.Timer(0.3, lambda: (seen.append(held(pad)), controls.request_stop("test stop"))).start()

    stats = Driver(env, PressingActor(script), controls).run(max_seconds=5)
    env.close()
    assert stats.stopped_by == "test stop" and stats.steps == 6
    assert seen == [(0, 0, 0)]  # released while paused, not only at the end
    assert held(pad) == (0, 0, 0)


@pytest.mark.parametrize("signal_name, code", [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_releases_the_buttons_through_the_real_class(tmp_path, signal_name, code):
    """A real signal to a process holding A and RT down on the real VX360 class (uinput faked):
    the last report it sends has every button released and both triggers at rest."""
    log = tmp_path / "reports.txt"
    script = textwrap.dedent(f"""
        import signal, sys, time, numpy as np
        import vgamepad.lin.virtual_gamepad as vg
        from explorer.config import PadConfig
        from explorer.envs.live.pad import VGamepadPad, neutral_on_exit
        out = open({str(log)!r}, "w", buffering=1)
        class Dev:
            def send_events(self, events):
                e = {{x.code.name: x.value for x in events}}
                out.write(f"{{e['BTN_SOUTH']}} {{e['ABS_RZ']}} {{e['ABS_Y']}}\\n")
        vg.VGamepad._create_gamepad_uinput_device = lambda self: Dev()
        pad = VGamepadPad(PadConfig(buttons=("a", "rt")))
        try:
            with neutral_on_exit(pad):
                pad.send(np.array([0, 0, 0, 1.0, 1.0, 1.0]))
                print("ready", flush=True)
                time.sleep(30)
        except KeyboardInterrupt:
            sys.exit(130)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(getattr(__import__("signal"), signal_name))
    assert proc.wait(10) == code
    reports = log.read_text().split("\n")[:-1]
    pressed = reports.index("1 255 " + str(~32767))  # A, RT and the walk stick were held
    assert reports[pressed + 1:] and set(reports[pressed + 1:]) == {"0 0 " + str(~0)}  # then released, centred


# ---------------------------------------------------------------- actors and learner

def test_a_held_button_is_sent_as_taps_with_the_gap_between_presses():
    held = np.array([0, 0, 0, 1.0, 1.0, -1.0, 0.7], np.float32)  # A held, B released, RT pulled
    taps = Taps(("a", "b", "rt"), gap=3)
    sent = np.stack([taps(held.copy()) for _ in range(9)])
    assert sent[:, 4].tolist() == [1, -1, -1, -1, 1, -1, -1, -1, 1]  # pressed, then released for 3 steps
    assert (sent[:, 5] == -1).all() and (sent[:, 6] == np.float32(0.7)).all()  # a trigger is pulled, never tapped
    assert (sent[:, :4] == held[:4]).all()
    released = held.copy()
    released[4] = -1.0
    assert taps(released.copy())[4] == -1 and taps(held.copy())[4] == -1  # the gap runs on while released
    taps.reset()  # a new episode: pressed at once
    assert taps(held.copy())[4] == 1
    as_held = Taps(("a",), gap=0)
    assert [as_held(held[:5].copy())[4] for _ in range(4)] == [1, 1, 1, 1]  # 0: sent as held
    assert Config().pad.tap_gap == 0
    with pytest.raises(Exception, match="tap_gap"):
        load(None, ["pad.tap_gap=-1"])


def test_actors_send_a_held_button_as_taps_and_a_checkpoint_keeps_the_gap():
    import tensorflow as tf
    from test_learner import make

    from explorer.agent.actor import RandomActor
    from explorer.agent.networks import StickRange

    sticks = StickRange(LearnerConfig(), ("a",))
    plain = _acts(RandomActor(0, sticky_steps=8, sticks=sticks), 800)
    tapped = _acts(RandomActor(0, sticky_steps=8, sticks=sticks, tap_gap=8), 800)
    presses = np.flatnonzero(tapped[:, 4] > 0)
    assert len(presses) > 20 and np.diff(presses).min() == 9  # never two presses within the gap
    assert set(presses) <= set(np.flatnonzero(plain[:, 4] > 0))  # the same draws: pressed only where held
    np.testing.assert_array_equal(tapped[:, :4], plain[:, :4])

    step = Step(tf.zeros((3, 16, 16, 3), tf.uint8), first=True)
    held = make({"learner.schedule.warmup_steps": 10**6}, buttons=("a",))  # warm-up sticks: A held about half the time
    taps = make({"learner.schedule.warmup_steps": 10**6}, buttons=("a",), tap_gap=5)
    sent_held, sent = _acts(held.actor, 400, step), _acts(taps.actor, 400, step)
    np.testing.assert_array_equal(sent[:, :4], sent_held[:, :4])  # the same sticks: only A is sent otherwise
    presses = np.flatnonzero(sent[:, 4] > 0)
    assert len(presses) > 10 and np.diff(presses).min() == 6
    assert set(presses) <= set(np.flatnonzero(sent_held[:, 4] > 0))
    state = taps.actor.state()
    assert state["tap_wait"] == taps.actor.taps.wait.tolist()
    taps.actor.taps.reset()
    taps.actor.load(state)
    assert taps.actor.taps.wait.tolist() == state["tap_wait"]
    taps.actor.load({k: v for k, v in state.items() if k != "tap_wait"})  # a checkpoint from before taps loads
    taps.actor.taps.wait[:] = 5
    taps.actor.new_episode = True  # each episode starts with nothing to wait for
    a = taps.actor.act(step)
    assert taps.actor.taps.wait.tolist() == ([5] if a[4] > 0 else [0])  # without the reset: [4]


def _acts(actor, n: int, step: Step | None = None) -> np.ndarray:
    """``n`` actions of ``actor`` in one episode (nothing is observed, so nothing ends it)."""
    acts = []
    for _ in range(n):
        acts.append(actor.act(step))
        actor.new_episode = False  # as observe() sets it after a step that did not end the episode
    return np.stack(acts)


def test_actors_hold_buttons_as_pressed_or_released():
    from explorer.agent.actor import RandomActor
    from explorer.agent.networks import StickRange

    sticks = StickRange(LearnerConfig(), ("a", "rt"))
    assert sticks.dim == 6 and sticks.prior[4:].tolist() == [0.0, 0.0]
    actor = RandomActor(0, sticky_steps=1, sticks=sticks)
    acts = np.stack([actor.act(None) for _ in range(400)])  # type: ignore[arg-type]
    assert set(np.unique(acts[:, 4])) == {-1.0, 1.0}  # A: pressed or released, nothing between
    assert 0.4 < (acts[:, 4] > 0).mean() < 0.6  # about half the time
    assert len(np.unique(acts[:, 5])) > 100 and acts[:, 5].min() < 0 < acts[:, 5].max()  # RT: a pull
    lo, hi = np.array(LearnerConfig().actions.action_low), np.array(LearnerConfig().actions.action_high)
    assert (acts[:, :4] >= lo).all() and (acts[:, :4] <= hi).all()  # sticks on their range


def test_press_share_sets_how_often_the_prior_presses_each_button_not_a_trigger():
    from explorer.agent.actor import RandomActor
    from explorer.agent.networks import StickRange

    learner = load(None, ["learner.actions.press_share=0.9"]).learner
    sticks = StickRange(learner, ("a", "rt"))
    np.testing.assert_allclose(sticks.prior[4:], [0.8, 0.0], atol=1e-6)  # 2 x 0.9 - 1 for A; a trigger keeps 0
    np.testing.assert_allclose(sticks.prior_offset("td3").numpy()[4], np.arctanh(0.8), atol=1e-5)  # the policy's
    actor = RandomActor(0, sticky_steps=1, sticks=sticks)
    acts = np.stack([actor.act(None) for _ in range(2000)])  # type: ignore[arg-type]
    assert 0.87 < (acts[:, 4] > 0).mean() < 0.93  # sticky_prior presses A in 9 draws of 10
    assert abs(acts[:, 5].mean()) < 0.1  # RT: pulled as before, centred
    for share in (0.0, 0.999, 1.0):  # at 0.999 and beyond the policy's start, atanh(2 x share - 1), runs away
        with pytest.raises(ConfigError, match="press_share"):
            load(None, [f"learner.actions.press_share={share}"])


def test_gradients_reach_the_button_heads_and_the_critic_sees_buttons_as_sent():
    import tensorflow as tf

    from explorer.agent.guard import check_gradients
    from explorer.agent.learner import Learner
    from explorer.agent.replay import Replay

    config = LearnerConfig(schedule=ScheduleConfig(batch_size=8, replay_mb=0.5),
                           networks=NetworksConfig(filters=(8, 8), feature=16, hidden=32))
    buttons = ("a", "rt")
    replay = Replay((16, 16, 3), 3, 9, 0.5, 0, action_dim=6)
    learner = Learner(config, (16, 16, 9), 9, replay, buttons=buttons)  # the guard ran in the constructor
    batch = learner.dummy_batch()
    features = learner.encoder(batch["obs"], training=False)
    head = learner.actor if config.networks.shared_encoder else learner.actor.get_layer("actor_head")  # default: shared
    out = head.get_layer("actor_out").kernel
    with tf.GradientTape() as tape:
        loss, _ = learner.actor_loss(batch["obs"], batch["ctx"], features)
    grad = tape.gradient(loss, out).numpy()  # [hidden, 2 * 6]: means then log-stds
    for column in (4, 5):  # the mean outputs of A and RT
        assert np.isfinite(grad[:, column]).all() and np.abs(grad[:, column]).max() > 0, column
    report = check_gradients(lambda: learner.actor_loss(batch["obs"], batch["ctx"], features)[0],
                             learner.actor.trainable_variables)
    assert report.ok
    a, _, _ = learner._sample(batch["obs"], batch["ctx"], training=False, features=features)
    a = a.numpy()
    assert set(np.unique(a[:, 4])) <= {-1.0, 1.0}  # A reaches the critic as sent
    assert len(np.unique(a[:, 5])) > 1 and not set(np.unique(a[:, 5])) <= {-1.0, 1.0}  # RT stays a pull
    metrics = learner.train({k: v.numpy() for k, v in batch.items()})
    assert np.isfinite(float(metrics["actor_loss"]))


def test_explore_learns_with_buttons_and_logs_their_press_rate(tmp_path):
    import json

    from explorer.run.explore import explore

    config = load(None, [f"run.dir={tmp_path}", "game.name=synthetic", "run.steps=120", "run.log_every=60",
                         "learner.schedule.warmup_steps=40", "learner.schedule.batch_size=8", "learner.schedule.replay_mb=2",
                         "learner.networks.filters=[8, 8]", "learner.networks.feature=16", "learner.networks.hidden=32",
                         "pad.buttons=['a', 'rt']", "record.dir=" + str(tmp_path / "sessions")])
    summary = explore(config, progress=False)
    from pathlib import Path
    lines = [json.loads(x) for x in (Path(summary["run_dir"]) / "metrics.jsonl").read_text().splitlines()]
    logged = [x for x in lines if "action/pressed_a" in x]
    assert logged and all(0.0 <= x["action/pressed_a"] <= 1.0 for x in logged)
    assert any(0.0 < x["action/pressed_a"] < 1.0 for x in logged)
    from explorer.envs.sessions.reader import Session
    (path,) = (tmp_path / "sessions").iterdir()
    session = Session(path)
    assert session.buttons == ("a", "rt")
    actions = np.concatenate([s.action for s in session.iter_step_arrays()])
    known = actions[~np.isnan(actions).any(axis=1)]
    assert known.shape[1] == 6 and set(np.unique(known[:, 4])) == {-1.0, 1.0}


# ---------------------------------------------------------------- sessions

def _record(path, buttons, actions):
    from explorer.envs.sessions.writer import Recorder

    with Recorder(path, {"test": True}, chunk_frames=4, buttons=buttons) as rec:
        for i, a in enumerate(actions):
            rec.add(np.full(SHAPE, i, np.uint8), a, 0.5, first=i == 0, last=i == len(actions) - 1)


def test_an_old_session_without_buttons_replays_with_the_buttons_released(tmp_path):
    import json

    from explorer.envs.sessions.env import SessionEnv
    from explorer.envs.sessions.reader import Session, sessions_dataset

    _record(tmp_path / "old", (), [np.full(4, 0.5, np.float32)] * 9 + [None])
    meta = json.loads((tmp_path / "old" / "meta.json").read_text())
    del meta["buttons"]  # as written before buttons existed
    (tmp_path / "old" / "meta.json").write_text(json.dumps(meta))
    session = Session(tmp_path / "old")
    assert session.buttons == ()
    env = SessionEnv([session], stack=2, ring_capacity=8, buttons=("a", "rt"))
    step = env.reset()
    np.testing.assert_array_equal(step.info["action"], [0.5, 0.5, 0.5, 0.5, -1.0, -1.0])
    (batch,) = list(sessions_dataset([session], stack=2, batch_size=16, buttons=("a",)))
    assert batch["action"].shape[1] == 5 and (batch["action"].numpy()[:, 4] == -1).all()


def test_sessions_keep_their_buttons_by_name(tmp_path):
    from explorer.envs.sessions.env import SessionEnv
    from explorer.envs.sessions.reader import Session
    from explorer.envs.sessions.writer import RecorderError

    acts = [np.array([0.1, 0, 0, 1, 1.0, -1.0], np.float32)] * 5
    _record(tmp_path / "s", ("a", "b"), acts)
    session = Session(tmp_path / "s")
    assert session.buttons == ("a", "b")
    env = SessionEnv([session], stack=2, ring_capacity=8, buttons=("b", "rt", "a"))  # another order, one new
    np.testing.assert_allclose(env.reset().info["action"], [0.1, 0, 0, 1, -1.0, -1.0, 1.0])
    with pytest.raises(RecorderError, match="4 stick axes and the buttons"):
        _record(tmp_path / "bad", ("a",), [np.zeros(4, np.float32)])


def test_a_replay_of_an_old_session_trains_the_agent_with_buttons(tmp_path):
    import json

    from explorer.run.replay import replay_train

    actions = [np.array([0.2, 0, 0, 0.8], np.float32)] * 39 + [None]
    _record(tmp_path / "old", (), actions)
    meta = json.loads((tmp_path / "old" / "meta.json").read_text())
    del meta["buttons"]
    (tmp_path / "old" / "meta.json").write_text(json.dumps(meta))
    config = load(None, ["learner.schedule.warmup_steps=0", "learner.schedule.batch_size=8",
                         "learner.schedule.replay_mb=1", "learner.networks.filters=[8, 8]", "learner.networks.feature=16",
                         "learner.networks.hidden=32", "observation.width=16", "observation.height=16"])
    assert config.pad.buttons == ("a",)
    summary = replay_train(config, [tmp_path / "old"], tmp_path / "run", epochs=1)
    assert summary["updates"] > 0 and summary["transitions"] == 39

