"""A memory of where the episode has been, dead-reckoned for the reach planner (``learner.actions.plan_memory``).

The agent knows every stick value it sent, so it knows its heading: a turn at full camera x is a fixed angle per
step (``turn_rate``). How far a move took it the sticks do not say, because walls stop it, but the reach prior
predicts it from the frame. From the two the planner keeps an estimate of the player's path through the episode,
in cells the size of the coverage's, and among its candidates prefers those the reach prior expects to carry onto
cells outside it. The estimate drifts (docs/experiments.md measures it against the engine's positions); it is
reset at every episode start and holds nothing a checkpoint or a resumed run would need.

With ``learner.actions.plan_route`` the same estimate is a map to route by: once the cell the player stands in
has held ``plan_route`` decisions' worth of steps (it is worn), the planner heads for the nearest cell of the
episode's ground that borders ground not yet walked and is not worn itself (the frontier), along the shortest way
through cells already walked (known to be floor), and prefers the candidate the reach prior expects to carry
farthest toward the next cells of that way.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from explorer.agent.reach import UNITS

#: map units of one memory cell: the coverage's cell on the built-in game
CELL = 64.0
#: cells of a route ahead of the player it heads for (the route bends round corners beyond)
AHEAD = 3
#: cells a route search visits at most
SEARCH = 4096
_AROUND = ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1))


class PlaceMemory:
    """The estimated path of one episode, and the planner's score of candidates against it.

    Args:
      turn_rate: degrees the view turns per step at full camera x (positive camera x turns right).
      hold: steps a decision is held (``learner.action_repeat``): the steps a reach prediction covers.
      weight: ``learner.actions.plan_memory``: a candidate's score is its predicted reach times
        ``1 + weight * new / hold``, with ``new`` the estimated cells outside the memory its path would cross.
      route_after: ``learner.actions.plan_route``: decisions' worth of steps in a cell after which the planner
        routes to the frontier (0: never).
    """

    def __init__(self, turn_rate: float, hold: int, weight: float, route_after: int = 0):
        if turn_rate <= 0:
            raise ValueError("learner.actions.plan_memory and plan_route dead-reckon the heading from camera x, but "
                             "this game's turn rate is unknown: set novelty.turn_rate (degrees per step at full "
                             "camera x)")
        self.turn_rate, self.hold, self.weight = float(turn_rate), int(hold), float(weight)
        self.worn_steps = int(route_after) * self.hold
        self.reset()

    def reset(self) -> None:
        """A new episode: the player at the origin, facing along x, and nothing visited but the start."""
        self.x = self.y = self.heading = 0.0
        self.pace = 0.0  # map units per step of the decision being held, as the reach prior predicted it
        self.visited: set[tuple[int, int]] = {(0, 0)}
        self.steps: dict[tuple[int, int], int] = {}  # steps the player stood in each cell, as estimated

    def cell(self) -> tuple[int, int]:
        """The cell the player stands in, as estimated."""
        return math.floor(self.x / CELL), math.floor(self.y / CELL)

    def route(self) -> list[tuple[int, int]] | None:
        """When the cell the player stands in is worn (``route_after``): the shortest way through walked cells
        (8 neighbours) to the nearest frontier cell (walked, not worn, beside a cell not walked), from the next
        cell to that one; None when the cell is not worn or no frontier is in reach."""
        start = self.cell()
        if not self.worn_steps or self.steps.get(start, 0) < self.worn_steps:
            return None
        parent: dict[tuple[int, int], tuple[int, int] | None] = {start: None}
        queue: deque[tuple[int, int]] = deque([start])
        while queue and len(parent) < SEARCH:
            c = queue.popleft()
            if c != start and self.steps.get(c, 0) < self.worn_steps and any(
                    (c[0] + dx, c[1] + dy) not in self.visited for dx, dy in _AROUND[:4]):
                way = [c]
                while parent[way[-1]] != start:
                    way.append(parent[way[-1]])  # type: ignore[arg-type]
                return way[::-1]
            for dx, dy in _AROUND:
                n = (c[0] + dx, c[1] + dy)
                if n in self.visited and n not in parent:
                    parent[n] = c
                    queue.append(n)
        return None

    def route_scores(self, sent: np.ndarray, reach: np.ndarray) -> np.ndarray | None:
        """``float64[K]``: when :meth:`route` gives a way, each candidate's expected progress (map units) toward
        the way's cell ``AHEAD`` on (or its last), its predicted path going the distance ``reach`` predicts;
        None to score as without a route."""
        way = self.route()
        if way is None:
            return None
        goal = way[min(AHEAD, len(way)) - 1]
        gx, gy = (goal[0] + 0.5) * CELL - self.x, (goal[1] + 0.5) * CELL - self.y
        norm = math.hypot(gx, gy)
        if norm < 1e-6:
            return None
        pace = np.maximum(np.asarray(reach, np.float64), 0.0) * UNITS / self.hold
        xs, ys, _ = self._paths(sent, pace)
        return ((xs[:, -1] - self.x) * gx + (ys[:, -1] - self.y) * gy) / norm

    def _paths(self, sent: np.ndarray, pace: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``x, y`` (``float64[K, hold]``) after each of ``hold`` steps of each action of ``sent`` (as sent:
        camera x, camera y, walk x, walk y, ...) at ``pace`` map units a step, and the headings after them."""
        sent = np.asarray(sent, np.float64)
        cam, wx, wy = sent[:, 0:1], sent[:, 2:3], sent[:, 3:4]
        steps = np.arange(1, self.hold + 1, dtype=np.float64)[None]
        heading = np.radians(self.heading - self.turn_rate * cam * steps)
        norm = np.hypot(wx, wy)
        scale = np.divide(np.asarray(pace, np.float64).reshape(-1, 1), norm, out=np.zeros_like(norm), where=norm > 1e-6)
        dx = scale * (wy * np.cos(heading) + wx * np.sin(heading))
        dy = scale * (wy * np.sin(heading) - wx * np.cos(heading))
        return self.x + np.cumsum(dx, axis=1), self.y + np.cumsum(dy, axis=1), np.degrees(heading)

    def new_cells(self, sent: np.ndarray, reach: np.ndarray) -> np.ndarray:
        """``float64[K]``: for each action of ``sent``, the cells outside the memory its path would cross if it
        went the distance ``reach`` (the reach prior's output) predicts over the hold."""
        pace = np.maximum(np.asarray(reach, np.float64), 0.0) * UNITS / self.hold
        xs, ys, _ = self._paths(sent, pace)
        cx, cy = np.floor(xs / CELL).astype(np.int64), np.floor(ys / CELL).astype(np.int64)
        return np.array([len({c for c in zip(a.tolist(), b.tolist(), strict=True) if c not in self.visited})
                         for a, b in zip(cx, cy, strict=True)], np.float64)

    def scores(self, sent: np.ndarray, reach: np.ndarray) -> np.ndarray:
        """``float64[K]``: each candidate's predicted reach, raised by the share of its path on new cells."""
        reach = np.maximum(np.asarray(reach, np.float64), 0.0)
        return reach * (1.0 + self.weight * self.new_cells(sent, reach) / self.hold)

    def decide(self, reach: float) -> None:
        """The decision now held is expected to go ``reach`` over the hold: the pace of the steps it is sent."""
        self.pace = max(float(reach), 0.0) * UNITS / self.hold

    def advance(self, sent: np.ndarray) -> None:
        """One step of ``sent`` (the action as sent) at the held decision's pace: the path and memory grow."""
        xs, ys, heading = self._paths(np.asarray(sent)[None], np.array([self.pace]))
        self.x, self.y, self.heading = float(xs[0, 0]), float(ys[0, 0]), float(heading[0, 0]) % 360.0
        c = self.cell()
        self.visited.add(c)
        self.steps[c] = self.steps.get(c, 0) + 1
