"""The context input: its layout, the view rarity (learner.networks.view_strips), the echo memory
(learner.networks.echo_units) and its checkpoint state."""

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


def test_oracle_map_marks_the_cells_stood_in_around_the_player_turned_with_its_heading():
    from types import SimpleNamespace

    from explorer.agent.context import OracleMap

    at = lambda x, y, angle: {"position": SimpleNamespace(x=x, y=y, angle=angle)}  # noqa: E731
    m = OracleMap(3, 64.0)
    m.see(at(32.0, 32.0, 0.0))  # cell (0, 0), facing +x
    m.see(at(96.0, 32.0, 0.0))  # cell (1, 0): the first cell is now behind
    grid = m.value.reshape(3, 3)  # rows: ahead, level, behind; columns: left, centre, right
    assert grid[1, 1] == 1.0 and grid[2, 1] == 1.0 and grid.sum() == 2.0
    m.see(at(96.0, 32.0, 90.0))  # turned to face +y: the first cell (-x) is on the left
    grid = m.value.reshape(3, 3)
    assert grid[1, 0] == 1.0 and grid[1, 1] == 1.0 and grid.sum() == 2.0
    m.reset()
    m.see(at(96.0, 32.0, 90.0))
    assert m.value.sum() == 1.0  # a new episode remembers only where it stands
    with pytest.raises(ValueError, match="does not report"):
        m.see({})


def test_context_carries_the_oracle_map_and_keeps_it_in_its_state():
    from types import SimpleNamespace

    at = {"position": SimpleNamespace(x=0.0, y=0.0, angle=0.0)}
    ctx = Context(True, horizon=100, action_dim=5, oracle_map=3)
    assert ctx.dim == 5 + 3 + 9
    ctx.reset(None, at)
    ctx.advance(np.zeros(5, np.float32), 1.0, None, {"position": SimpleNamespace(x=70.0, y=0.0, angle=0.0)})
    value = ctx.value()
    assert value.shape == (17,) and value[-9:].sum() == 2.0
    again = Context(True, horizon=100, action_dim=5, oracle_map=3)
    again.load(ctx.state())
    assert np.array_equal(again.value(), value)


def test_echo_memory_remembers_what_the_episode_showed_and_forgets_at_its_start():
    """Two episodes that differ only long ago still differ now (the slow units), and reset clears both."""
    ctx_a, ctx_b = (Context(True, horizon=100, action_dim=5, echo_units=30) for _ in range(2))
    assert ctx_a.dim == 5 + 3 + 30 and ctx_a.reads_frames and not Context(True, 100, 5).reads_frames
    assert Context(False, 100, 5, echo_units=30).dim == 1
    go = np.full(5, 0.5, np.float32)
    ctx_a.reset(view(RED, RED))
    ctx_b.reset(view(RED, RED))
    for _ in range(10):  # a blue room for one, a green room for the other
        ctx_a.advance(go, 1.0, view(BLUE, BLUE))
        ctx_b.advance(go, 1.0, view(GREEN, GREEN))
    for _ in range(20):  # then the same red corridor for both
        ctx_a.advance(go, 1.0, view(RED, RED))
        ctx_b.advance(go, 1.0, view(RED, RED))
    echo_a, echo_b = ctx_a.echo, ctx_b.echo
    assert echo_a is not None and echo_b is not None
    gap = np.abs(echo_a.value - echo_b.value)
    groups = np.array_split(np.arange(30), 3)  # leaks 0.5, 0.1, 0.02: the slow units keep the rooms apart
    assert gap[groups[2]].mean() > 0.05 and gap[groups[2]].mean() > 2 * gap[groups[0]].mean(), gap
    assert np.all(np.abs(echo_a.value) <= 1.0)
    np.testing.assert_array_equal(ctx_a.value()[-30:], echo_a.value)
    ctx_a.reset(view(RED, RED))
    fresh = Context(True, horizon=100, action_dim=5, echo_units=30)
    fresh.reset(view(RED, RED))
    np.testing.assert_array_equal(ctx_a.value(), fresh.value())  # the same fixed weights in every instance


def test_echo_memory_goes_through_a_checkpoint_and_refuses_a_damaged_state():
    ctx = Context(True, horizon=100, action_dim=5, echo_units=12)
    ctx.reset(view(RED, BLUE))
    for i in range(7):
        ctx.advance(np.full(5, i / 7, np.float32), 1.0, view(BLUE if i % 2 else GREEN, RED))
    state = ctx.state()
    again = Context(True, horizon=100, action_dim=5, echo_units=12)
    again.load(state)
    np.testing.assert_array_equal(again.value(), ctx.value())
    for c in (ctx, again):
        c.advance(np.zeros(5, np.float32), 0.0, view(GREEN, GREEN))
    np.testing.assert_array_equal(again.value(), ctx.value())
    del state["echo"]  # written without echo_units: the memory starts empty
    again.load(state)
    np.testing.assert_array_equal(again.value()[-12:], np.zeros(12))
    with pytest.raises(ValueError, match="echo.value holds 3 values, not 12"):
        again.load({**state, "echo": {"value": [0.0, 0.1, 0.2]}})
    with pytest.raises(ValueError, match="echo_units needs the frame"):
        ctx.advance(np.zeros(5, np.float32), 0.0)


def test_echo_memory_reads_grey_frames_too():
    ctx = Context(True, horizon=100, action_dim=4, echo_units=8)
    grey = np.zeros((8, 16, 1), np.uint8)
    ctx.reset(grey)
    ctx.advance(np.ones(4, np.float32), 1.0, grey + 200)
    assert ctx.echo is not None and ctx.echo.bins == 64 and np.any(ctx.echo.value != 0)


def test_a_damaged_echo_memory_in_a_checkpoint_is_refused():
    from test_learner import make

    agent = make({"learner.networks.echo_units": 8})
    state = agent.actor.state()
    agent.actor.validate_state(state)  # as written
    state["context"]["echo"]["value"] = [0.0] * 5
    with pytest.raises(ValueError, match="context.echo.value has 5 values, learner.networks.echo_units = 8"):
        agent.actor.validate_state(state)
    state["context"]["echo"]["value"] = [1.0] * 4 + [-1.0] * 4  # saturated units, as float32 tanh can give
    agent.actor.validate_state(state)
    agent.actor.context.load(state["context"])
    state["context"]["echo"]["value"] = [0.0] * 7 + [3.0]  # tanh units never leave [-1, 1]
    with pytest.raises(ValueError, match="echo"):
        agent.actor.validate_state(state)


def _unrolled(core_weights, inputs):
    """The GRU's state after ``inputs`` from a zero state, step by step in numpy."""
    from explorer.agent.context import gru_step

    h = np.zeros(core_weights[1].shape[0], np.float32)
    for x in inputs:
        h = gru_step(h, x, *core_weights)
    return h


def test_the_recurrent_core_reads_the_whole_episode_through_its_window_and_starts_afresh_with_each():
    """The Keras core over the context's window, from the state the context stored, gives the state a GRU run
    over every step of the episode gives; a new episode forgets the last."""
    from explorer.agent.networks import build_core, core_width
    from explorer.config import LearnerConfig

    config = LearnerConfig.model_validate({"networks": {"recurrent_units": 6, "recurrent_window": 3}})
    ctx = Context(True, horizon=100, action_dim=5, echo_units=4, recurrent=(6, 3))
    core = build_core(ctx.dim, config)
    assert core.output_shape[-1] == core_width(ctx.dim, config) == ctx.dim - 3 * 25
    weights = core.get_layer("gru").get_weights()
    assert ctx.recurrent is not None
    ctx.recurrent.set_weights(*weights)
    rng = np.random.default_rng(0)
    for _episode in range(2):
        ctx.reset(rng.integers(0, 256, (8, 12, 3), dtype=np.uint8))
        seen = [ctx.recurrent.inputs[-1].copy()]
        for _step in range(7):
            value = ctx.value()
            out = core(value[None]).numpy()[0]
            np.testing.assert_allclose(out[-6:], _unrolled(weights, seen), atol=1e-5)
            np.testing.assert_array_equal(out[:-6], value[:-(3 * 25 + 6)])  # the rest of the context, as it was
            ctx.advance(rng.uniform(-1, 1, 5).astype(np.float32), 0.5, rng.integers(0, 256, (8, 12, 3), dtype=np.uint8))
            seen.append(ctx.recurrent.inputs[-1].copy())
        assert ctx.recurrent.valid.all() and np.any(ctx.recurrent.start != 0)  # steps have left the window
    ctx.reset(rng.integers(0, 256, (8, 12, 3), dtype=np.uint8))
    np.testing.assert_array_equal(ctx.recurrent.valid, [0, 0, 1])
    np.testing.assert_array_equal(ctx.recurrent.start, np.zeros(6))


def test_the_recurrent_core_needs_its_weights_before_a_step_leaves_the_window():
    ctx = Context(True, horizon=100, action_dim=4, recurrent=(4, 2))
    frame = np.zeros((8, 8, 3), np.uint8)
    ctx.reset(frame)
    ctx.advance(np.zeros(4, np.float32), 0.0, frame)  # the window holds both steps
    with pytest.raises(ValueError, match="core's weights were never given"):
        ctx.advance(np.zeros(4, np.float32), 0.0, frame)
    with pytest.raises(ValueError, match="weights"):
        ctx.recurrent.set_weights(np.zeros((3, 12)), np.zeros((4, 12)), np.zeros((2, 12)))


def test_a_damaged_recurrent_state_in_a_checkpoint_is_refused_and_a_sound_one_loads():
    from test_learner import make

    agent = make({"learner.networks.recurrent_units": 4, "learner.networks.recurrent_window": 3})
    frame = np.full((16, 16, 3), 90, np.uint8)
    context = agent.actor.context
    context.reset(frame)
    for _ in range(5):
        context.advance(np.zeros(context.action_dim, np.float32), 0.2, frame)
    state = agent.actor.state()
    agent.actor.validate_state(state)  # as written
    again = make({"learner.networks.recurrent_units": 4, "learner.networks.recurrent_window": 3})
    again.actor.context.load(state["context"])
    np.testing.assert_array_equal(again.actor.context.value(), context.value())
    sound = state["context"]["recurrent"]
    for damage, match in [({"start": [0.0] * 3}, r"start \[3\], not \[3, 24\], \[3\] and \[4\]"),
                          ({"start": [0.0] * 3 + [1.5]}, "start holds values"),
                          ({"valid": [1.0, 0.0, 1.0]}, "0s then 1s"),
                          ({"inputs": [[float("nan")] * 24] * 3}, "not finite"),
                          ({"inputs": [[1e6] * 24] * 3}, "beyond"),
                          ({"inputs": "x"}, "lists of numbers")]:
        state["context"]["recurrent"] = {**sound, **damage}
        with pytest.raises(ValueError, match=match):
            agent.actor.validate_state(state)
