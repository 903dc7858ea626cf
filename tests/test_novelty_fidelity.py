"""tools/novelty_fidelity.py's figures: the same-time correlation sees past an episode's own trend."""
from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def fidelity(load_tool):
    return load_tool("novelty_fidelity")


def test_a_signal_that_follows_only_the_episodes_trend_scores_on_the_sums_but_not_at_the_same_time(fidelity):
    rng = np.random.default_rng(0)
    when = np.tile(np.arange(500), 4)  # four 500-step episodes
    level = np.exp(-(when // 50) * 50 / 150)  # new ground falls over an episode, a step at a time
    truth = level + 0.3 * rng.normal(size=when.size)
    trend = level + 1e-3 * rng.normal(size=when.size)  # knows the time in the episode, nothing of the moves
    follower = truth - level + 0.2 * rng.normal(size=when.size)  # ranks the moves, not the trend
    assert fidelity.spearman(trend, truth) > 0.6  # over all steps the trend alone looks like a good signal
    assert abs(fidelity.same_time_spearman(trend, truth, when)) < 0.2
    assert fidelity.same_time_spearman(follower, truth, when) > 0.6


def test_same_time_leaves_out_bins_too_small_to_rank(fidelity):
    when = np.array([0, 1, 2, 60, 61])
    assert np.isnan(fidelity.same_time_spearman(np.arange(5.0), np.arange(5.0), when))
