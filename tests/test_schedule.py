"""The update schedule (warm-up, update-to-data ratio, lag, publishing, rate cap), and that every mode trains by it."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from explorer import cli
from explorer.agent.schedule import Due, UpdateSchedule
from explorer.agent.threaded import LockstepLearner, ThreadedLearner
from explorer.agent.trainer import InlineTrainer, updates_per_s
from explorer.config import Config, LearnerConfig, LiveConfig, ScheduleConfig, load
from explorer.core import ExplorerError
from explorer.run.builder import build_agent
from explorer.run.driver import Driver
from explorer.run.observers import Training
from explorer.testing.fakes import FakeEnv, FakeScreen

HANG_S = 300.0  # only a guard against a hang: the tests wait for what they check

# ---------------------------------------------------------------- the schedule, by hand


def test_the_warm_up_boundary():
    s = UpdateSchedule(warmup_steps=400, update_every=1)
    assert [s.started(n) for n in (0, 399, 400, 401)] == [False, False, True, True]
    assert [s.allowed(n) for n in (0, 399, 400, 401, 1200)] == [0, 0, 1, 2, 801]
    assert [s.due(n, 0) for n in (399, 400)] == [0, 1]


def test_one_update_per_four_steps_on_the_multiples_of_four():
    s = UpdateSchedule(warmup_steps=400, update_every=4)
    # 400, 404, 408: the multiples of 4 from the warm-up on
    assert [s.allowed(n) for n in (399, 400, 403, 404, 407, 408)] == [0, 1, 1, 2, 2, 3]
    # a warm-up between two multiples: the first update comes at the next multiple, 12, then 16
    s = UpdateSchedule(warmup_steps=10, update_every=4)
    assert [s.allowed(n) for n in (9, 10, 11, 12, 15, 16, 20)] == [0, 0, 0, 1, 1, 2, 3]
    # no warm-up: step 0 is a multiple too (replay is empty then, so nothing can run)
    s = UpdateSchedule(warmup_steps=0, update_every=4)
    assert [s.allowed(n) for n in (0, 3, 4, 8)] == [1, 1, 2, 3]


def test_the_updates_due_catch_up_after_a_pause_and_never_run_ahead():
    s = UpdateSchedule(warmup_steps=400, update_every=4)
    assert s.due(404, 2) == 0  # on schedule
    assert s.due(420, 1) == 5  # paused since 400: 404 ... 420 are due at once
    assert s.due(420, 10) == 0  # ahead (a resumed learner that trained freely): none until the steps catch up
    assert s.due(399, 0) == 0


def test_with_no_ratio_one_update_at_a_time_is_due_once_learning_has_started():
    s = UpdateSchedule(warmup_steps=16, update_every=None)
    assert s.allowed(10_000) is None
    assert [s.due(n, u) for n, u in ((15, 0), (16, 0), (16, 10_000))] == [0, 1, 1]
    assert not s.behind(10_000, 0)  # no ratio to fall behind


def test_falling_behind_is_more_than_lag_steps_of_data_past_the_ratio():
    s = UpdateSchedule(warmup_steps=0, update_every=4, lag_steps=8)
    assert s.allowed(100) == 26
    assert not s.behind(100, 24)  # 2 updates = 8 steps behind: at the limit, not past it
    assert s.behind(100, 23)  # 12 steps behind
    assert not UpdateSchedule(warmup_steps=0, update_every=4, lag_steps=0).behind(100, 0)  # 0: never waits
    assert not UpdateSchedule(warmup_steps=200, update_every=4, lag_steps=8).behind(100, 0)  # in the warm-up


def test_publishing_and_the_rate_cap():
    s = UpdateSchedule(publish_every=10, max_updates_per_s=20.0)
    assert [s.publishes(n) for n in (1, 9, 10, 20, 25)] == [False, False, True, True, False]
    assert s.min_period == pytest.approx(0.05)
    assert UpdateSchedule().min_period == 0.0


def test_the_schedule_of_a_config_and_bad_values():
    c = LearnerConfig(schedule=ScheduleConfig(warmup_steps=7, update_every=3, lag_steps=11, publish_every=5),
                      live=LiveConfig(max_updates_per_s=2.0))
    assert UpdateSchedule.from_config(c) == UpdateSchedule(7, 3, 11, 5, 0.0)  # the cap is live mode's
    assert UpdateSchedule.from_config(c, live=True) == UpdateSchedule(7, None, 11, 5, 2.0)  # live: no ratio
    for bad in ({"warmup_steps": -1}, {"update_every": 0}, {"publish_every": 0}, {"lag_steps": -1},
                {"max_updates_per_s": -1.0}):
        with pytest.raises(ExplorerError, match="update schedule"):
            UpdateSchedule(**bad)


def test_due_step_by_step_skips_what_a_run_before_made_and_what_could_not_run():
    due = Due(UpdateSchedule(warmup_steps=400, update_every=4))
    assert [due(n) for n in range(501, 509)] == [0, 0, 0, 1, 0, 0, 0, 1]  # resumed at 500: 504, 508
    assert due(520) == 3  # 512, 516, 520 (a step skipped by the caller is made up)
    assert due(520) == 0  # asked again at the same step: nothing more


def test_updates_per_second_counts_the_gaps_between_updates():
    assert updates_per_s(5, 10.0, 12.0) == 2.0  # 4 gaps in 2 s
    assert updates_per_s(1, 10.0, 10.0) == 0.0
    assert updates_per_s(0, None, 0.0) == 0.0


# ---------------------------------------------------------------- the trainers follow the schedule

SHAPE = (16, 16, 1)
SMALL = {"learner.schedule.batch_size": 8, "learner.schedule.warmup_steps": 30, "learner.schedule.update_every": 4, "learner.schedule.replay_mb": 1.0,
         "learner.networks.filters": (4,), "learner.networks.feature": 16, "learner.networks.hidden": 16}


class EveryFifth(UpdateSchedule):
    """A schedule other than the configured one: an update on the steps 35, 40, 45 ... (from 35)."""

    def allowed(self, steps: int) -> int | None:
        return max(0, (steps - 30) // 5)


def small_agent(acting_copy: bool = False):
    config = Config().replace(**SMALL, **{"novelty.signal": "pixel"})
    agent = build_agent(config, SHAPE, acting_copy=acting_copy)
    rng = np.random.default_rng(0)
    screen = FakeScreen([rng.integers(0, 255, SHAPE, dtype=np.uint8) for _ in range(30)])
    return agent, FakeEnv(screen, episode_steps=25, shape=SHAPE)


def updated_at(driver: Driver, steps: int) -> list[int]:
    """The agent steps whose transitions carry an update's metrics."""
    at: list[int] = []
    driver.on_step(lambda t: at.append(t.index) if "critic_loss" in t.metrics else None)
    driver.run(max_steps=steps)
    return at


@pytest.mark.parametrize("schedule", [UpdateSchedule(warmup_steps=30, update_every=4), EveryFifth(30)],
                         ids=["configured", "another"])
def test_the_inline_trainer_makes_the_updates_its_schedule_says(schedule):
    agent, env = small_agent()
    driver = Driver(env, agent.actor)
    trainer = InlineTrainer(agent.learner, schedule)
    Training(trainer, lambda: agent.actor.steps).attach(driver)
    at = updated_at(driver, 60)
    assert at == [n for n in range(1, 61) if schedule.due(n, schedule.allowed(n - 1) or 0)]
    assert at == ([32, 36, 40, 44, 48, 52, 56, 60] if type(schedule) is UpdateSchedule else [35, 40, 45, 50, 55, 60])
    assert trainer.stats()["updates"] == len(at) == int(agent.learner.updates.numpy())


def test_the_overlapped_trainer_submits_the_updates_its_schedule_says():
    agent, env = small_agent(acting_copy=True)
    submitted: list[int] = []
    lockstep = LockstepLearner(agent.learner, agent.actor, (6, 5), EveryFifth(30)).start()
    driver = Driver(env, agent.actor)
    Training(lockstep, lambda: agent.actor.steps).attach(driver)
    driver.on_step(lambda t: submitted.append(t.index) if lockstep.submitted > len(submitted) else None)
    try:
        driver.run(max_steps=60)
        lockstep.drain()
    finally:
        lockstep.stop()
    assert submitted == [35, 40, 45, 50, 55, 60]
    assert lockstep.updates == lockstep.stats()["updates"] == 6 == int(agent.learner.updates.numpy())


def test_a_threaded_learner_with_a_ratio_trains_up_to_what_the_schedule_allows_and_no_further():
    agent, env = small_agent()
    Driver(env, agent.actor).run(max_steps=40)  # replay holds a batch; no trainer yet
    steps = [20]  # in the warm-up
    updates: list[dict[str, float]] = []
    arrived = threading.Event()

    def on_update(metrics):
        updates.append(metrics)
        arrived.set()

    threaded = ThreadedLearner(agent.learner, UpdateSchedule(warmup_steps=30, update_every=4),
                               steps=lambda: steps[0], margin=(0, 0), on_update=on_update).start()
    try:
        steps[0] = 44  # 32, 36, 40, 44
        threaded.wake()
        while len(updates) < 4 and arrived.wait(HANG_S):
            arrived.clear()
        # no sleep can show it trains no further; its own answer can: nothing is due once it has made them
        assert threaded.schedule.due(steps[0], threaded.updates) == 0
    finally:
        threaded.stop()
    assert len(updates) == threaded.updates == 4 == int(agent.learner.updates.numpy())


# ---------------------------------------------------------------- the modes train by the schedule

# one decision per step (ViZDoom's own learner.action_repeat = 8 would put the first batch past these short runs)
EXPLORE = ["--no-progress", "--set", "learner.action_repeat=1", "--set", "game.episode_steps=50", "--set", "learner.schedule.warmup_steps=30",
           "--set", "learner.schedule.update_every=4", "--set", "learner.schedule.batch_size=8", "--set", "learner.networks.filters=[4]",
           "--set", "learner.networks.hidden=16", "--set", "learner.networks.feature=16", "--set", "learner.schedule.replay_mb=2"]


@pytest.mark.parametrize("overlap", [False, True], ids=["inline", "overlapped"])
def test_explore_trains_by_the_schedule(tmp_path, monkeypatch, overlap):
    monkeypatch.setattr(UpdateSchedule, "allowed", EveryFifth.allowed)
    assert cli.main(["explore", "--steps", "62", "--out", str(tmp_path), *EXPLORE,
                     "--set", f"learner.schedule.overlap={str(overlap).lower()}"]) == 0
    (run,) = list(tmp_path.iterdir())
    assert json.loads((run / "summary.json").read_text())["updates"] == 6  # 35, 40 ... 60, not 32, 36 ... 60


def test_the_learner_of_many_workers_allows_what_one_process_makes(tmp_path):
    from explorer.run.workers import LearnerService

    config = load(None, ["learner.schedule.warmup_steps=10", "learner.schedule.update_every=4", "learner.schedule.batch_size=8",
                         "learner.networks.filters=[4]", "learner.networks.hidden=16", "learner.networks.feature=16", "learner.schedule.replay_mb=1",
                         "observation.width=16", "observation.height=16", "novelty.signal=pixel"])
    (tmp_path / "config.toml").write_text("")
    service = LearnerService(config, tmp_path, (16, 16, 3))
    try:
        one_process = Due(UpdateSchedule.from_config(config.learner))
        made = 0
        for n in range(1, 41):
            made += one_process(n)
            assert service.target(n) == made, n  # 12, 16 ... (before: 10, 14 ...)
    finally:
        service.stop()


def test_the_workers_wait_for_a_learner_past_its_lag_by_the_schedule():
    from explorer.run.distributed import Coordinator

    config = load(None, ["learner.schedule.warmup_steps=10", "learner.schedule.update_every=4", "learner.schedule.lag_steps=4"])
    status = {"start": 0, "updates": 0, "transitions": 0}
    coordinator = Coordinator(config, None, [], None, status, progress=False)  # type: ignore[arg-type]
    behind = []
    for delivered in (9, 14, 16, 20):
        coordinator.delivered = delivered
        behind.append(coordinator._behind())
    # allowed 0, 1, 2, 3 updates: 0, 4, 8, 12 steps behind, past 4 from 16 on
    assert behind == [False, False, True, True]


def test_play_trains_by_the_schedule(tmp_path, monkeypatch):
    """Live mode asks the schedule before each update: one that never has an update due gets none, while the
    learner thread asked it past the warm-up (the run stops once it did)."""
    from explorer.run.driver import Controls
    from explorer.run.play import play

    controls = Controls()
    asked: list[int] = []

    def never(self, steps, updates):
        if self.started(steps):
            asked.append(steps)
            controls.request_stop("asked")
        return 0

    monkeypatch.setattr(UpdateSchedule, "due", never)
    config = load(None, [f"run.dir={str(tmp_path)!r}", "control.countdown_s=0", "control.hz=20", "capture.fps=20",
                         f"control.max_seconds={HANG_S}", "learner.schedule.warmup_steps=5", "learner.schedule.batch_size=8",
                         "learner.networks.filters=[4]", "learner.networks.hidden=16", "learner.networks.feature=16", "learner.schedule.replay_mb=2",
                         "observation.width=32", "observation.height=32"])
    rng = np.random.default_rng(0)
    screen = FakeScreen([rng.integers(0, 255, (32, 32, 3), dtype=np.uint8) for _ in range(10)])
    summary = play(config, dry_run=True, controls=controls, screen=screen)
    assert asked and summary["stopped_by"] == "asked", summary["stopped_by"]
    assert summary["learner"]["updates"] == 0
