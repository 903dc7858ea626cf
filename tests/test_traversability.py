"""tools/traversability.py: its samples (an 8-step distance inside one episode, the mean action over it)."""
from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def trav(load_tool):
    return load_tool("traversability")


def test_samples_are_the_distance_and_mean_action_of_the_next_steps_inside_one_episode(trav, tmp_path):
    n = 30
    frames = np.arange(n, dtype=np.uint8)[:, None, None, None] * np.ones((1, 64, 64, 3), np.uint8)
    actions = np.zeros((n, 5), np.float32)
    actions[:, 0] = np.arange(n) % 2  # camera x alternates 0, 1: its mean over 8 steps is 0.5
    actions[:, 3] = 1.0
    positions = np.stack([np.arange(n) * 10.0, np.zeros(n)], axis=1)  # 10 map units a step, east
    episodes = np.where(np.arange(n) < 20, 0, 1)
    path = tmp_path / "data.npz"
    np.savez_compressed(path, frames=frames, actions=actions, positions=positions, episodes=episodes)
    f, a, y = trav.samples(path)
    assert len(f) == 12 + 2  # steps 0..11 stay in episode 0 for 8 more steps; 20, 21 in episode 1
    assert [int(x[0, 0, 0]) for x in f] == [*range(12), 20, 21]
    np.testing.assert_allclose(y, 80.0 / trav.SCALE)
    np.testing.assert_allclose(a, np.tile([0.5, 0.0, 1.0], (14, 1)))


