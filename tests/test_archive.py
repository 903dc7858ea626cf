"""The memory of the run (learner.actions.return_share): the best episode it keeps, the return along it while the
game repeats itself, and the end of the return when it does not."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from explorer.agent.archive import SIDE, TOLERANCE, ReturnMemory, Trajectory, thumbnail
from explorer.config import ConfigError, load
from explorer.core import Step
from explorer.run.builder import build_agent

FRAME = (16, 16, 3)


def _frame(t: int, salt: int = 0) -> np.ndarray:
    """A frame of a game that repeats itself: the same at the same step of every episode (``salt`` another game)."""
    return np.random.default_rng(1000 * salt + t).integers(0, 256, FRAME, dtype=np.uint8)


def _episode(memory: ReturnMemory, novelty: list[float], salt: int = 0, hold: int = 2) -> list[np.ndarray | None]:
    """Play one episode of ``len(novelty)`` steps, a decision every ``hold`` steps: the returned decisions (None
    where it decided anew), each new decision an action of its own."""
    memory.reset()
    got = []
    for t, n in enumerate(novelty):
        if t % hold == 0:
            back = memory.returning(_frame(t, salt))
            got.append(back)
            memory.decided(back if back is not None else np.full(5, t + 100 * salt, np.float32), _frame(t, salt))
        memory.stepped(n)
    memory.end()
    return got


def test_a_thumbnail_is_the_block_means_of_the_frame():
    frame = np.zeros((64, 64, 3), np.uint8)
    frame[:8, :8] = 80  # the first block of the 8 x 8
    small = thumbnail(frame)
    assert small.shape == (SIDE, SIDE, 3)
    assert small[0, 0].tolist() == [80.0, 80.0, 80.0] and small[1:].sum() == 0 and small[0, 1:].sum() == 0


def test_the_return_point_is_where_the_episode_had_gathered_its_share():
    trajectory = Trajectory(starts=[0, 2, 4, 6], gathered=[0.0, 5.0, 8.0, 9.0], total=10.0)
    assert trajectory.until(0.5) == 1  # the decision at step 2 starts with half gathered: return along the first
    assert trajectory.until(0.75) == 2
    assert trajectory.until(0.95) == 4  # never reached at a decision's start: every decision
    assert Trajectory(starts=[0], gathered=[0.0], total=0.0).until(0.5) == 0  # nothing gathered: no return


def test_a_new_episode_returns_along_the_best_one_while_the_frames_match():
    memory = ReturnMemory(0.6)
    first = _episode(memory, [1.0] * 10)  # decisions at 0, 2, 4, 6, 8; 10 gathered
    assert first == [None] * 5 and memory.best is not None and memory.best.total == 10.0
    second = _episode(memory, [1.0] * 10)  # 6 gathered by the decision at step 6: return along 3
    assert [b is not None for b in second] == [True, True, True, False, False]
    assert [float(b[0]) for b in second[:3]] == [0.0, 2.0, 4.0]  # the first episode's decisions
    assert memory.returned == [0, 3]
    assert memory.best.total == 10.0 and float(memory.best.actions[0][0]) == 0.0  # a tie keeps the best it had


def test_a_richer_episode_becomes_the_best_and_a_poorer_one_does_not():
    memory = ReturnMemory(0.5)
    _episode(memory, [1.0] * 10)
    _episode(memory, [1.0] * 6 + [3.0] * 4)  # returns along 2, then finds more: 18
    assert memory.best.total == 18.0
    third = _episode(memory, [0.0] * 10)  # the novelty of its steps is not what the best was kept for
    assert memory.best.total == 18.0 and third[0] is not None


def test_the_return_ends_where_the_game_does_not_repeat_itself():
    memory = ReturnMemory(0.9)
    _episode(memory, [1.0] * 10)
    other = _episode(memory, [1.0] * 10, salt=1)  # another game from the first frame on
    assert other == [None] * 5 and memory.returned[-1] == 0
    # a frame a little off (noise under the tolerance) is still the same place
    memory.reset()
    near = np.clip(_frame(0).astype(np.int16) + 1, 0, 255).astype(np.uint8)
    assert float(np.mean(np.abs(thumbnail(near) - thumbnail(_frame(0))))) <= TOLERANCE
    assert memory.returning(near) is not None


def test_an_episode_joined_part_way_is_neither_returned_along_nor_kept():
    memory = ReturnMemory(0.5)  # as after --resume: the first episode is under way
    memory.decided(np.zeros(5, np.float32), _frame(0))
    memory.stepped(100.0)
    memory.end()
    assert memory.best is None and memory.returned == []
    assert memory.returning(_frame(0)) is None


def test_a_share_outside_zero_and_one_is_refused():
    with pytest.raises(ValueError, match="between 0 and 1"):
        ReturnMemory(1.0)
    with pytest.raises(ConfigError, match="return_share"):
        load(None, ["learner.actions.return_share=1.5"])


def small_actor(*sets: str, frame: tuple[int, int, int] = FRAME):
    """A learning actor of small networks deciding every 4 steps on one-frame observations of ``frame``, with
    ``sets`` on top."""
    config = load(None, ["learner.action_repeat=4", "learner.schedule.warmup_steps=0", "learner.networks.filters=[8]",
                         "learner.networks.hidden=32", "learner.networks.feature=32", "learner.schedule.replay_mb=8",
                         "observation.stack=1", "learner.seed=5", "novelty.exclude_recent=2", *sets])
    return build_agent(config, frame).actor


def _actor(share: float):
    return small_actor(f"learner.actions.return_share={share}")


def _play(actor, salt: int, steps: int = 24) -> list[np.ndarray]:
    """One episode of a game whose frames depend on the step alone: the actions the actor sent."""
    sent, step = [], Step(tf.constant(_frame(0, salt)[None]), first=True)
    for t in range(steps):
        action = actor.act(step)
        sent.append(np.array(action))
        nxt = Step(tf.constant(_frame(t + 1, salt)[None]), last=t == steps - 1)
        actor.observe(step, action, nxt)
        step = nxt
    return sent


def test_the_actor_sends_the_best_episode_s_actions_again_then_explores():
    actor = _actor(0.5)
    assert actor.memory is not None
    first = _play(actor, 0)
    second = _play(actor, 0)
    back = actor.memory.returned[-1]
    assert back >= 1 and actor.memory.returned == [0, back]
    same = 4 * back  # each returned decision held its 4 steps, taps and all, as the first episode sent them
    np.testing.assert_array_equal(np.array(second[:same]), np.array(first[:same]))
    assert not np.array_equal(np.array(second[same:same + 4]), np.array(first[same:same + 4]))  # then its own
    other = _play(actor, 3)  # another game: nothing to return along
    assert actor.memory.returned[-1] == 0
    assert not np.array_equal(np.array(other[:4]), np.array(first[:4]))


def test_without_return_share_the_actor_keeps_no_memory_of_the_run():
    assert _actor(0.0).memory is None
