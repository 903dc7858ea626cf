"""The context input: its layout, the view rarity (learner.view_strips) and its checkpoint state."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.agent.context import Context, ViewRarity, colour_bins

RED, BLUE, GREEN = (220, 20, 20), (20, 20, 220), (20, 220, 20)


def view(left, right, h=8, w=16) -> np.ndarray:
    """A frame whose left half shows colour ``left`` and right half colour ``right``."""
    frame = np.zeros((h, w, 3), np.uint8)
    frame[:, : w // 2] = left
    frame[:, w // 2:] = right
    return frame


def test_colour_bins_cut_each_channel_into_equal_ranges():
    frame = np.array([[[0, 0, 0], [255, 255, 255], [128, 0, 43]]], np.uint8)
    np.testing.assert_array_equal(colour_bins(frame, 6), [[0, 215, 3 * 36 + 0 * 6 + 1]])


def test_the_strips_showing_what_the_episode_has_not_score_highest_and_fade_as_they_are_seen():
    rarity = ViewRarity(strips=4, bins=6)
    for _ in range(30):
        rarity.see(view(RED, RED))  # a long red corridor
    rarity.see(view(RED, BLUE))  # a blue doorway opens on the right
    first = rarity.value.copy()
    assert first[2] > 0 and first[3] > 0 and first[0] < 0 and first[1] < 0
    np.testing.assert_allclose(first.sum(), 0.0, atol=1e-5)  # relative to the strips' mean: a direction
    for _ in range(60):
        rarity.see(view(RED, BLUE))
    assert 0 < rarity.value[3] < first[3]  # blue, now seen often, stands out less
    rarity.see(view(GREEN, BLUE))  # and a green opening on the left outranks it
    assert rarity.value[0] > rarity.value[3]
    assert np.all(np.abs(rarity.value) <= 3.0)
    rarity.reset()
    np.testing.assert_array_equal(rarity.value, np.zeros(4))


def test_context_layout_with_view_strips_and_a_checkpoint_round_trip():
    ctx = Context(True, horizon=100, action_dim=5, view_strips=4)
    assert ctx.dim == 5 + 3 + 4 and Context(True, 100, 5).dim == 8 and Context(False, 100, 5, view_strips=4).dim == 1
    ctx.reset(view(RED, RED))
    for _ in range(10):
        ctx.advance(np.full(5, 0.5, np.float32), 1.0, view(RED, RED))
    ctx.advance(np.full(5, 0.5, np.float32), 1.0, view(RED, BLUE))
    value = ctx.value()
    assert value.shape == (12,) and value[-1] > 0 > value[-4]
    state = ctx.state()
    again = Context(True, horizon=100, action_dim=5, view_strips=4)
    again.load(state)
    np.testing.assert_array_equal(again.value(), value)
    again.advance(np.zeros(5, np.float32), 0.0, view(RED, BLUE))
    ctx.advance(np.zeros(5, np.float32), 0.0, view(RED, BLUE))
    np.testing.assert_array_equal(again.value(), ctx.value())  # the episode's colours came through the checkpoint
    del state["view"]  # a checkpoint written without view_strips
    again.load(state)
    np.testing.assert_array_equal(again.value()[-4:], np.zeros(4))
    with pytest.raises(ValueError, match="view_strips needs the frame"):
        ctx.advance(np.zeros(5, np.float32), 0.0)
