"""The pad onto Gymnasium action spaces: hand-checked states on ALE's joystick, MiniGrid's actions,
Box, MultiBinary and MultiDiscrete, and one-line errors for mappings that cannot be built."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.core import ExplorerError
from explorer.envs.gym.actions import ActionMap, joystick_state

spaces = pytest.importorskip("gymnasium.spaces")

ALE = ["NOOP", "FIRE", "UP", "RIGHT", "LEFT", "DOWN", "UPRIGHT", "UPLEFT", "DOWNRIGHT", "DOWNLEFT", "UPFIRE",
       "RIGHTFIRE", "LEFTFIRE", "DOWNFIRE", "UPRIGHTFIRE", "UPLEFTFIRE", "DOWNRIGHTFIRE", "DOWNLEFTFIRE"]
MINIGRID = ["left", "right", "forward", "pickup", "drop", "toggle", "done"]


def pad(camera=(0.0, 0.0), walk=(0.0, 0.0), buttons=()):
    return np.array([*camera, *walk, *buttons], np.float32)


def test_ale_joystick_words_are_left_stick_directions_and_a_for_fire():
    assert joystick_state("NOOP") == {}
    assert joystick_state("UPRIGHTFIRE") == {"walk_y": 1.0, "walk_x": 1.0, "a": 1.0}
    assert joystick_state("DOWNLEFT") == {"walk_y": -1.0, "walk_x": -1.0}
    assert joystick_state("FIRE") == {"a": 1.0}
    assert joystick_state("LEFTUP") is None


def test_stick_up_right_with_a_held_is_uprightfire_and_a_centred_pad_is_noop():
    m = ActionMap(spaces.Discrete(18), ("a",), meanings=ALE)
    assert ALE[m(pad(walk=(0.7, 0.7), buttons=(1.0,)))] == "UPRIGHTFIRE"
    assert ALE[m(pad())] == "NOOP"
    assert ALE[m(pad(buttons=(-1.0,)))] == "NOOP"  # A released
    assert ALE[m(None)] == "NOOP"  # nothing sent: the centred pad
    assert ALE[m(pad(walk=(0.2, -0.1)))] == "NOOP"  # inside the dead zone
    assert ALE[m(pad(walk=(0.9, 0.3)))] == "RIGHT"  # 18 degrees: the right gate, not up-right
    assert ALE[m(pad(walk=(-0.5, -0.6), buttons=(1.0,)))] == "DOWNLEFTFIRE"
    assert ALE[m(pad(camera=(1.0, 1.0)))] == "NOOP"  # ALE's joystick is the left stick: the camera does nothing
    assert ALE[m(pad(buttons=(np.nan,)))] == "NOOP"


def test_without_the_a_button_fire_actions_cannot_be_reached():
    m = ActionMap(spaces.Discrete(18), (), meanings=ALE)
    assert set(m.unreachable) == {name for name in ALE if "FIRE" in name}
    assert ALE[m(pad(walk=(0.0, 1.0)))] == "UP"


def test_minigrid_actions_turn_with_camera_x_walk_forward_and_use_a_and_b():
    m = ActionMap(spaces.Discrete(7), ("a", "b"), meanings=MINIGRID)
    assert MINIGRID[m(pad(camera=(-1.0, 0.0)))] == "left"
    assert MINIGRID[m(pad(camera=(0.8, 0.1)))] == "right"
    assert MINIGRID[m(pad(walk=(0.0, 1.0)))] == "forward"
    assert MINIGRID[m(pad(buttons=(1.0, -1.0)))] == "toggle"
    assert MINIGRID[m(pad(buttons=(-1.0, 1.0)))] == "pickup"
    assert MINIGRID[m(pad())] == "done"
    assert m.unreachable == ["drop"]  # X is not among the policy's buttons


def test_an_explicit_table_replaces_the_meanings():
    m = ActionMap(spaces.Discrete(3), ("a",), {"0": {}, "1": {"walk_y": 1.0}, "2": {"a": 1.0}})
    assert m(pad(walk=(0.0, 0.9))) == 1 and m(pad(buttons=(1.0,))) == 2 and m(pad()) == 0
    named = ActionMap(spaces.Discrete(18), ("a",), {"NOOP": {}, "UP": {"walk_y": 1.0}}, meanings=ALE)
    assert ALE[named(pad(walk=(0.0, 1.0), buttons=(1.0,)))] == "UP"  # the nearest described state
    assert sorted(named.described) == [0, 2]


def test_discrete_start_offsets_the_actions():
    m = ActionMap(spaces.Discrete(2, start=5), (), {"0": {}, "1": {"walk_x": 1.0}})
    assert m(pad()) == 5 and m(pad(walk=(1.0, 0.0))) == 6


def test_box_takes_the_sticks_first_by_default_and_a_declared_table_otherwise():
    box = spaces.Box(low=np.array([-2, 0, -1, -1, 0], np.float32), high=np.array([2, 1, 1, 1, 10], np.float32),
                     dtype=np.float32)
    m = ActionMap(box, ("a",))
    out = m(pad(camera=(0.5, -1.0), walk=(0.0, 1.0), buttons=(1.0,)))
    np.testing.assert_allclose(out, [1.0, 0.0, 0.0, 1.0, 10.0])
    assert out.dtype == np.float32 and out.shape == (5,)
    car = ActionMap(spaces.Box(-1.0, 1.0, (2,), np.float32), ("a",), {"0": {"camera_x": 1.0}, "1": {"walk_y": 1.0}})
    np.testing.assert_allclose(car(pad(camera=(-0.25, 0.9), walk=(0.3, 0.6))), [-0.25, 0.6])
    np.testing.assert_allclose(car(None), [0.0, 0.0])


def test_multibinary_and_multidiscrete_hold_the_buttons():
    bits = ActionMap(spaces.MultiBinary(3), ("a", "b"))
    np.testing.assert_array_equal(bits(pad(buttons=(1.0, -1.0))), [1, 0, 0])
    np.testing.assert_array_equal(bits(pad(buttons=(-1.0, 1.0))), [0, 1, 0])
    jump = ActionMap(spaces.MultiBinary(2), (), {"0": {"walk_y": 1.0}, "1": {"walk_y": -1.0}})
    np.testing.assert_array_equal(jump(pad(walk=(0.0, 0.8))), [1, 0])
    np.testing.assert_array_equal(jump(pad(walk=(0.0, -0.8))), [0, 1])
    multi = ActionMap(spaces.MultiDiscrete([3, 2]), ("a", "rt"))
    np.testing.assert_array_equal(multi(pad(buttons=(1.0, 0.9))), [1, 1])
    np.testing.assert_array_equal(multi(pad(buttons=(-1.0, 0.2))), [0, 0])


@pytest.mark.parametrize(("space", "table", "meanings", "message"), [
    (spaces.Discrete(4), None, None, "the env's Discrete(4) actions have no meanings the pad knows; describe each (by "
     'index 0..3) as a pad state in game.actions, e.g. game.actions = {"0" = {}, "1" = {walk_y = 1}, "2" = {a = 1}} '
     "(docs/gym.md)"),
    (spaces.Discrete(3), None, ["NOOP", "JUMP", "left"], "the env's actions JUMP have no known pad state (its actions: "
     "NOOP, JUMP, left); describe each as a pad state in game.actions, e.g. game.actions = {NOOP = {}, UP = "
     "{walk_y = 1}, FIRE = {a = 1}} (docs/gym.md)"),
    (spaces.Discrete(3), {"0": {"b": 1.0}}, None, "game.actions['0'] names b, not an input of the pad (camera_x, "
     "camera_y, walk_x, walk_y, a): use those names, or add the button to pad.buttons"),
    (spaces.Discrete(3), {"7": {}}, None, "game.actions names the env action '7', which it does not have: name an "
     "index 0..2"),
    (spaces.Discrete(2), {"JUMP": {}}, ["NOOP", "FIRE"], "game.actions names the env action 'JUMP', which it does not "
     "have: name NOOP, FIRE or an index 0..1"),
    (spaces.Box(-1, 1, (2,)), {"x": {"walk_x": 1.0}}, None, "game.actions names dimension 'x' of a Box action of 2 "
     'dimensions: use indices 0..1, e.g. game.actions = {"0" = {walk_x = 1}, "1" = {walk_y = 1}}'),
    (spaces.Tuple([spaces.Discrete(2)]), None, None, "the env's action space Tuple(Discrete(2)) is not one the pad "
     "maps onto (Discrete, Box, MultiBinary, MultiDiscrete); wrap the env to one of those"),
])
def test_a_mapping_that_cannot_be_built_is_one_line_naming_the_actions(space, table, meanings, message):
    with pytest.raises(ExplorerError) as err:
        ActionMap(space, ("a",), table, meanings)
    assert str(err.value) == message


def test_the_fast_discrete_lookup_equals_the_gate_on_every_kind_of_value():
    from explorer.envs.gym.actions import gate, pad_inputs

    m = ActionMap(spaces.Discrete(18), ("a", "rt"), {name: {**(joystick_state(name) or {}), **({"rt": 1.0} if "DOWN" in
                                                                                              name else {})}
                                                     for name in ALE}, meanings=ALE)
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1.2, 1.2, (3000, 6)).astype(np.float32)
    actions[::7, rng.integers(0, 6)] = np.nan
    actions[::5, :4] = rng.choice([0.0, 0.3, -0.3, 1.0, -1.0, 0.2121320], (len(actions[::5]), 4))  # the gate's edges
    for a in actions:
        g = gate(pad_inputs(a, m.buttons), m.dead_zone)
        assert m._gate_key(a) == tuple(g.tolist())
        assert m(a) == int(m._index_of[int(np.argmin(((m._table - g) ** 2).sum(1)))])
