"""A memory of where the episode has been, dead-reckoned for the reach planner (``learner.actions.plan_memory``).

The agent knows every stick value it sent, so it knows its heading: a turn at full camera x is a fixed angle per
step (``turn_rate``). How far a move took it the sticks do not say, because walls stop it, but the reach prior
predicts it from the frame. From the two the planner keeps an estimate of the player's path through the episode,
in cells the size of the coverage's, and among its candidates prefers those the reach prior expects to carry onto
cells outside it. The estimate drifts (docs/experiments.md measures it against the engine's positions); it is
reset at every episode start and holds nothing a checkpoint or a resumed run would need.
"""

from __future__ import annotations

import math

import numpy as np

from explorer.agent.reach import UNITS

#: map units of one memory cell: the coverage's cell on the built-in game
CELL = 64.0


class PlaceMemory:
    """The estimated path of one episode, and the planner's score of candidates against it.

    Args:
      turn_rate: degrees the view turns per step at full camera x (positive camera x turns right).
      hold: steps a decision is held (``learner.action_repeat``): the steps a reach prediction covers.
      weight: ``learner.actions.plan_memory``: a candidate's score is its predicted reach times
        ``1 + weight * new / hold``, with ``new`` the estimated cells outside the memory its path would cross.
    """

    def __init__(self, turn_rate: float, hold: int, weight: float):
        if turn_rate <= 0:
            raise ValueError("learner.actions.plan_memory dead-reckons the heading from camera x, but this game's "
                             "turn rate is unknown: set novelty.turn_rate (degrees per step at full camera x)")
        self.turn_rate, self.hold, self.weight = float(turn_rate), int(hold), float(weight)
        self.reset()

    def reset(self) -> None:
        """A new episode: the player at the origin, facing along x, and nothing visited but the start."""
        self.x = self.y = self.heading = 0.0
        self.pace = 0.0  # map units per step of the decision being held, as the reach prior predicted it
        self.visited: set[tuple[int, int]] = {(0, 0)}

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
        self.visited.add((math.floor(self.x / CELL), math.floor(self.y / CELL)))
