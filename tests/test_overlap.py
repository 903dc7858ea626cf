"""Acting and learning overlapped (explore): one update per step on a thread, one step behind, repeatable."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.agent.replay import Replay
from explorer.agent.schedule import UpdateSchedule
from explorer.agent.threaded import LearnerDied, LockstepLearner
from explorer.config import Config
from explorer.run.builder import build_agent
from explorer.run.driver import Driver
from explorer.run.observers import Training
from explorer.testing.fakes import FakeEnv, FakeScreen

SHAPE = (16, 16, 1)
SMALL = {"learner.schedule.batch_size": 8, "learner.schedule.warmup_steps": 20, "learner.schedule.update_every": 1, "learner.schedule.replay_mb": 1.0,
         "learner.networks.filters": (4,), "learner.networks.feature": 16, "learner.networks.hidden": 16}


def agent_and_env(seed: int = 0):
    config = Config().replace(**SMALL, **{"novelty.signal": "pixel"})
    agent = build_agent(config, SHAPE, acting_copy=True)
    rng = np.random.default_rng(seed)
    screen = FakeScreen([rng.integers(0, 255, SHAPE, dtype=np.uint8) for _ in range(30)])
    return config, agent, FakeEnv(screen, episode_steps=25, shape=SHAPE)


def overlapped_run(steps: int, seed: int = 0):
    config, agent, env = agent_and_env(seed)
    lockstep = LockstepLearner(agent.learner, agent.actor, (config.learner.n_step + 1, config.observation.stack + 2),
                               UpdateSchedule.from_config(config.learner)).start()
    driver = Driver(env, agent.actor)
    Training(lockstep, lambda: agent.actor.steps).attach(driver)
    lags, actions = [], []

    def watch(t):
        lags.append(lockstep.submitted - lockstep.installed)
        actions.append(t.action)

    driver.on_step(watch)
    try:
        driver.run(max_steps=steps)
        lockstep.drain()
    finally:
        lockstep.close()
    return agent, lockstep, np.stack(actions), lags


def test_overlapped_learning_trains_once_per_step_one_step_behind_and_repeats_exactly():
    agent, lockstep, actions, lags = overlapped_run(80)
    assert lockstep.submitted == lockstep.done == 80 - SMALL["learner.schedule.warmup_steps"] + 1  # one update per step after warm-up
    assert int(agent.learner.updates.numpy()) == lockstep.done
    assert max(lags) <= 2  # the actor is at most one update ahead of the weights it acts with
    # after drain() the actor acts with the learner's own weights
    for a, b in zip(agent.actor.policy_net.get_weights(), agent.learner.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    again, _, actions2, _ = overlapped_run(80)
    np.testing.assert_array_equal(actions, actions2)  # timing does not enter: the same run twice
    for a, b in zip(agent.learner.get_weights(), again.learner.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_failing_update_stops_the_run_on_the_acting_thread():
    config, agent, env = agent_and_env()

    def boom(*args):
        raise FloatingPointError("critic loss is NaN/Inf")

    agent.learner.step = boom
    lockstep = LockstepLearner(agent.learner, agent.actor, (6, 5), UpdateSchedule.from_config(config.learner)).start()
    driver = Driver(env, agent.actor)
    Training(lockstep, lambda: agent.actor.steps).attach(driver)
    with pytest.raises(LearnerDied, match="NaN"):
        driver.run(max_steps=60)
    lockstep.close()
    assert env.pad.is_neutral


def test_sampling_at_a_mark_never_draws_what_came_after_it():
    replay = Replay((4, 4, 1), 2, 1, memory_mb=0.001, seed=0)  # a small replay that wraps
    frame = np.zeros((4, 4, 1), np.uint8)
    ids = [replay.push_frame(frame), replay.push_frame(frame)]

    def add(reward: float) -> None:
        nonlocal ids
        nxt = replay.push_frame(frame)
        replay.add(np.array(ids), np.zeros(4), reward, 0.9, np.array([ids[1], nxt]), np.zeros(1), np.zeros(1))
        ids = [ids[1], nxt]

    for _ in range(3 * replay.capacity):
        add(1.0)
    at = replay.mark()
    for _ in range(3):
        add(-1.0)  # added after the mark: overwrites the oldest slots
    batch = replay.sample(2000, at=at, margin=(3, 3))
    assert np.all(batch["reward"] == 1.0)
    assert np.any(replay.sample(2000)["reward"] == -1.0)  # without the mark they are drawn


def python_lines(script: str) -> list[str]:
    """What ``script`` prints, line by line, run by a fresh Python (TensorFlow not started)."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120).stdout.split("\n")


def test_thread_pools_are_sized_before_tensorflow_starts_and_refused_after():
    script = (
        "from explorer.run.builder import configure_threads\n"
        "import tensorflow as tf\n"
        "configure_threads((1, 2))\n"
        "print(tf.config.threading.get_inter_op_parallelism_threads(), tf.config.threading.get_intra_op_parallelism_threads())\n"
        "tf.constant(1.0) + 1.0\n"
        "configure_threads((1, 2))  # the same again: fine\n"
        "try:\n"
        "    configure_threads((2, 1))\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, str(err)[:40])\n")
    out = python_lines(script)
    assert out[0] == "1 2"
    assert out[1].startswith("ExplorerError run.threads = [2, 1] cannot")


def test_by_default_each_op_gets_one_thread_and_a_program_that_started_tensorflow_keeps_its_pools():
    script = (
        "from explorer.config import Config\n"
        "from explorer.run.builder import configure_threads\n"
        "import tensorflow as tf\n"
        "configure_threads(Config().run.threads)\n"
        "print(tf.config.threading.get_inter_op_parallelism_threads(), tf.config.threading.get_intra_op_parallelism_threads())\n")
    out = python_lines(script)
    assert out[0] == "0 1"  # inter-op: TensorFlow's choice; intra-op: one thread per op
    script = (
        "from explorer.run.builder import configure_threads\n"
        "import tensorflow as tf\n"
        "tf.constant(1.0) + 1.0\n"
        "configure_threads((0, 0))  # too late for the one-thread choice: left out, no error\n"
        "print(tf.config.threading.get_intra_op_parallelism_threads())\n")
    out = python_lines(script)
    assert out[0] == "0"
