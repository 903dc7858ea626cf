"""The dead-reckoned memory of place (learner.actions.plan_memory): the path it keeps from the sticks' heading and
the reach prior's pace, the new ground it scores, and the reach planner that weighs candidates by it."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from explorer.agent.place import CELL, UNITS, PlaceMemory
from explorer.agent.reach import FRAME
from explorer.config import ConfigError, load
from explorer.core import Step
from explorer.run.builder import build_agent

FORWARD = np.array([0.0, 0.0, 0.0, 1.0, -1.0], np.float32)  # camera x, camera y, walk x, walk y, A
BACK = np.array([0.0, 0.0, 0.0, -1.0, -1.0], np.float32)
RIGHT_TURN = np.array([1.0, 0.0, 0.0, 0.0, -1.0], np.float32)


def test_the_path_follows_the_heading_at_the_reach_prior_s_pace():
    memory = PlaceMemory(turn_rate=45.0, hold=8, weight=1.0)
    memory.decide(2.0)  # 200 map units over the hold: 25 a step
    for _ in range(8):
        memory.advance(FORWARD)
    assert (memory.x, memory.y) == pytest.approx((200.0, 0.0))
    assert memory.visited == {(0, 0), (1, 0), (2, 0), (3, 0)}
    memory.advance(RIGHT_TURN)  # a turn in place: 45 degrees to the right, no step
    assert memory.heading == pytest.approx(315.0) and memory.x == pytest.approx(200.0)
    memory.advance(FORWARD)
    assert (memory.x, memory.y) == pytest.approx((200.0 + 25 / np.sqrt(2), -25 / np.sqrt(2)))
    memory.reset()
    assert (memory.x, memory.y, memory.heading, memory.pace, memory.visited) == (0.0, 0.0, 0.0, 0.0, {(0, 0)})


def test_new_ground_is_counted_off_the_episode_s_path_and_raises_a_candidate_s_score():
    memory = PlaceMemory(turn_rate=45.0, hold=8, weight=2.0)
    memory.decide(4 * CELL / UNITS)
    for _ in range(4):
        memory.advance(FORWARD)  # 2 cells east of the start, the way it came behind it
    sent, reach = np.stack([BACK, FORWARD]), np.full(2, 2 * CELL / UNITS)
    new = memory.new_cells(sent, reach)
    assert new.tolist() == [0.0, 2.0]  # back over its own path: nothing; on: two cells it never stood in
    np.testing.assert_allclose(memory.scores(sent, reach), reach * (1 + 2.0 * new / 8))
    assert memory.new_cells(sent, np.zeros(2)).tolist() == [0.0, 0.0]  # a move expected to go nowhere finds nothing


def test_a_game_whose_turn_rate_is_unknown_is_refused():
    with pytest.raises(ValueError, match="set novelty.turn_rate"):
        PlaceMemory(turn_rate=0.0, hold=8, weight=1.0)


def test_plan_memory_without_the_reach_planner_is_refused():
    with pytest.raises(ConfigError, match="plan_memory = 1 weighs the reach prior's candidates"):
        load(None, ["learner.actions.plan_memory=1", "learner.actions.plan_score=model",
                    "learner.actions.plan_candidates=4"])


def _actor(weight: float):
    config = load(None, ["learner.actions.plan_candidates=5", "learner.actions.plan_score=reach",
                         f"learner.actions.plan_memory={weight}", "learner.action_repeat=8",
                         "learner.schedule.warmup_steps=0", "learner.networks.filters=[8]", "learner.networks.hidden=32",
                         "learner.networks.feature=32", "learner.schedule.replay_mb=8", "observation.stack=1"])
    return build_agent(config, FRAME).actor


def test_the_planner_sends_the_candidate_of_the_best_reach_and_new_ground_and_the_path_takes_each_step():
    actor = _actor(4.0)
    assert actor.place is not None and actor.place.turn_rate == 40.0  # the built-in game's: 10 per tic x 4 tics
    seen = {}
    scores = actor._plan_scores

    def spy(obs, actions, ctx):
        out = scores(obs, actions, ctx)
        seen["actions"], seen["reach"] = actions.numpy(), out.numpy()
        return out

    actor._plan_scores = spy
    rng = np.random.default_rng(3)
    step = Step(tf.constant(rng.integers(0, 256, (1, *FRAME), dtype=np.uint8)), first=True)
    actor.place.visited.update({(i, j) for i in range(-3, 4) for j in range(-3, 4)})  # reset by the new episode
    action = actor.act(step)
    assert len(actor.place.visited) <= 2  # the start and at most the cell of the first step
    weighed = PlaceMemory(40.0, 8, 4.0).scores(seen["actions"], seen["reach"])
    best = int(np.argmax(weighed))
    np.testing.assert_allclose(actor.held, seen["actions"][best], atol=1e-6)
    assert actor.place.pace == pytest.approx(max(float(seen["reach"][best]), 0.0) * UNITS / 8)
    mirror = PlaceMemory(40.0, 8, 4.0)  # the path the held decision should trace, step by step
    mirror.decide(float(seen["reach"][best]))
    mirror.advance(actor.held)
    steps_taken, previous = 1, step
    while True:  # the rest of the hold: each step sent is a step of the path at the decided pace
        assert (actor.place.x, actor.place.y, actor.place.heading) == pytest.approx((mirror.x, mirror.y, mirror.heading))
        assert mirror.visited <= actor.place.visited
        now = Step(step.obs)
        actor.observe(previous, action, now)
        action, previous = actor.act(now), now
        steps_taken += 1
        if actor.started:
            break
        mirror.advance(actor.held)
    assert steps_taken == 9  # a new decision after the 8 steps of the hold


def test_without_plan_memory_the_actor_keeps_no_path():
    assert _actor(0.0).place is None


def _walk(memory: PlaceMemory, cells: list[tuple[int, int]], steps: int = 1) -> None:
    """Stand ``steps`` steps in each of ``cells`` (the estimate placed at their centres)."""
    for cx, cy in cells:
        memory.x, memory.y = (cx + 0.5) * CELL, (cy + 0.5) * CELL
        for _ in range(steps):
            memory.advance(np.zeros(5, np.float32))  # no pace: a step in place


def test_a_worn_cell_routes_through_walked_cells_to_the_nearest_frontier():
    memory = PlaceMemory(turn_rate=45.0, hold=8, weight=0.0, route_after=1)
    # a corridor walked from (0, 0) to (4, 0) and back to the start, each cell worn (8 steps) but (4, 0), the end
    _walk(memory, [(0, 0), (1, 0), (2, 0), (3, 0)], steps=8)
    _walk(memory, [(4, 0)], steps=2)
    _walk(memory, [(3, 0), (2, 0), (1, 0), (0, 0)], steps=8)
    assert memory.route() == [(1, 0), (2, 0), (3, 0), (4, 0)]  # along the walked cells to the unworn end
    sent = np.stack([FORWARD, BACK, RIGHT_TURN])  # facing along x: forward goes toward the frontier
    progress = memory.route_scores(sent, np.full(3, 2.0))
    assert progress is not None and int(np.argmax(progress)) == 0 and progress[1] < 0 < progress[0]
    assert progress[0] == pytest.approx(200.0 - 0.0, abs=1.0)  # 200 units on, all of it toward (2, 0)'s centre
    _walk(memory, [(4, 0)], steps=8)  # the end worn too: nothing but worn cells, no frontier left in reach
    _walk(memory, [(0, 0)], steps=1)
    assert memory.route() is None and memory.route_scores(sent, np.full(3, 2.0)) is None


def test_a_cell_not_worn_and_route_after_zero_do_not_route():
    memory = PlaceMemory(turn_rate=45.0, hold=8, weight=0.0, route_after=2)
    _walk(memory, [(0, 0), (1, 0)], steps=8)
    _walk(memory, [(0, 0)], steps=7)  # 15 steps of the 16 that wear it
    assert memory.route() is None
    memory.advance(np.zeros(5, np.float32))
    assert memory.route() == [(1, 0)]
    never = PlaceMemory(turn_rate=45.0, hold=8, weight=1.0)
    _walk(never, [(0, 0)], steps=100)
    assert never.route() is None


def test_plan_route_without_the_reach_planner_is_refused():
    with pytest.raises(ConfigError, match="plan_route = 2 routes by the reach prior's candidates"):
        load(None, ["learner.actions.plan_route=2", "learner.actions.plan_score=model",
                    "learner.actions.plan_candidates=4"])
    with pytest.raises(ConfigError, match="plan_route"):
        load(None, ["learner.actions.plan_route=65"])
