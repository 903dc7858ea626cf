"""The map of the episode's places from pixels (learner.actions.route_after): places as pictures, ways as the
decisions that led between them, routes to the nearest place visited less, and ways dropped once they miss."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from test_archive import small_actor

from explorer.agent.routes import MISSES, SIDE, PlaceMap, picture
from explorer.config import ConfigError, load
from explorer.core import Step

FRAME = (64, 64, 3)


def _view(place: int) -> np.ndarray:
    """The frame seen in ``place``: a pattern of its own, the same at every visit."""
    return np.random.default_rng(place).integers(0, 256, FRAME, dtype=np.uint8)


def _act(place: int) -> np.ndarray:
    return np.full(5, float(place) / 10, np.float32)


def test_a_picture_is_grey_block_means_that_light_does_not_change():
    frame = _view(1)
    p = picture(frame)
    assert p.shape == (SIDE * SIDE,) and abs(float(np.linalg.norm(p)) - 1.0) < 1e-5 and abs(float(p.mean())) < 1e-6
    dimmer = (frame.astype(np.float32) * 0.5 + 20).astype(np.uint8)  # less light, a little haze
    assert float(picture(dimmer) @ p) > 0.99
    assert float(picture(_view(2)) @ p) < 0.5  # another place
    assert not picture(np.full(FRAME, 90, np.uint8)).any()  # one colour: no picture to compare
    with pytest.raises(ValueError, match="at least 16 x 16"):
        picture(np.zeros((8, 8, 3), np.uint8))


def _visit(m: PlaceMap, place: int, held: np.ndarray | None = None) -> np.ndarray | None:
    """One decision in ``place``: the map's route (None: decide anew), and the decision held (the route's, or
    ``held``, or one of the place's own)."""
    routed = m.route(_view(place))
    m.decided(routed if routed is not None else (held if held is not None else _act(place)))
    return routed


def test_a_worn_place_routes_along_the_decision_that_led_to_a_place_visited_less():
    m = PlaceMap(route_after=2)
    assert _visit(m, 0) is None and _visit(m, 1) is None and _visit(m, 2) is None  # 0 -> 1 -> 2, each new
    assert m.count == 3
    # back in 0 (its second visit: worn): its way to 1 (visited once) is the decision held in 0 the first time
    np.testing.assert_array_equal(_visit(m, 0), _act(0))
    assert m.expected == 1
    np.testing.assert_array_equal(_visit(m, 1), _act(1))  # and in 1 its way to 2
    assert _visit(m, 2) is None  # 2's only way leads to 0, worn, and on to 1, worn: nothing visited less in reach
    assert m.routes == 2 and m.count == 3


def test_a_route_takes_the_first_way_of_the_shortest_chain_to_a_place_visited_less():
    m = PlaceMap(route_after=2)
    for place in (0, 1, 2, 3, 0, 1, 2):  # a loop of four places, walked once and then to 2 again
        _visit(m, place)
    # in 0 (its third visit) the nearest place visited less is 3, three ways on (0 -> 1 -> 2 -> 3): the chain
    # goes through 1, so the decision is 0's way to 1
    np.testing.assert_array_equal(m.route(_view(0)), _act(0))
    assert m.expected == 1


def test_a_way_that_misses_twice_is_dropped_and_a_fresh_start_forgets_all():
    m = PlaceMap(route_after=2)
    for place in (0, 1, 0):
        _visit(m, place)  # the visit to 0 routes toward 1 (visited once): expected 1 next
    assert m.expected == 1
    for n in range(MISSES):  # the way leads to 5 instead, each time
        assert 1 in m.ways[0]
        _visit(m, 5 + n)
        m.here, m.expected, m.held = 0, 1, _act(0)  # stood in 0 again, routed toward 1 again
    assert 1 not in m.ways[0]  # missed MISSES times: not routed by again
    m.reset()
    assert m.count == 0 and m.ways == [] and m.here is None and m.routes == 0


def test_a_full_map_places_a_new_picture_in_its_nearest_place(monkeypatch):
    import explorer.agent.routes as routes
    monkeypatch.setattr(routes, "MOST", 2)
    m = routes.PlaceMap(route_after=3)
    m.pictures = np.zeros((2, SIDE * SIDE), np.float32)
    assert [m.locate(_view(p)) for p in (0, 1)] == [0, 1]
    assert m.locate(_view(2)) in (0, 1) and m.count == 2


def test_route_after_is_validated():
    with pytest.raises(ValueError, match="at least 1"):
        PlaceMap(0)
    with pytest.raises(ConfigError, match="route_after"):
        load(None, ["learner.actions.route_after=65"])
    with pytest.raises(ConfigError, match="route_after"):
        load(None, ["learner.actions.route_after=-1"])


def _actor(route_after: int):
    return small_actor(f"learner.actions.route_after={route_after}", frame=FRAME)


def test_the_actor_takes_the_way_out_of_a_worn_place_again():
    """A game of three places seen in turn, each for one decision of 4 steps: in the second round 0 and 1 are
    worn (route_after = 2) and their ways on lead to a place visited less, so the actor sends what it sent there
    in the first round; from 2 every way leads to worn places, and it decides anew."""
    actor = _actor(2)
    assert actor.map is not None
    places = [0, 1, 2, 0, 1, 2]
    sent, step = [], Step(tf.constant(_view(places[0])[None]), first=True)
    for t in range(4 * len(places)):
        action = actor.act(step)
        sent.append(np.array(action))
        nxt = Step(tf.constant(_view(places[min((t + 1) // 4, len(places) - 1)])[None]), last=t == 4 * len(places) - 1)
        metrics = actor.observe(step, action, nxt)
        step = nxt
    sent_ = np.array(sent)
    np.testing.assert_array_equal(sent_[12:16], sent_[0:4])  # in 0 again: 0's way to 1
    np.testing.assert_array_equal(sent_[16:20], sent_[4:8])  # in 1 again: 1's way to 2
    assert not np.array_equal(sent_[20:24], sent_[8:12])  # in 2 again: its own decision
    assert metrics["routed"] == 2 and metrics["places"] == 3  # the episode's last step reports its routes
    assert actor.map.count == 3


def test_without_route_after_the_actor_keeps_no_map():
    assert _actor(0).map is None
