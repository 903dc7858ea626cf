"""A cheap made-up game: a walled room of coloured floor cells, walked with the same four sticks.

No engine, no display: a step costs tens of microseconds, so tests and
throughput benchmarks (``tools/bench_scale.py``) run many instances on a
small machine. It speaks the built-in game's language: the sticks turn and
walk as the ViZDoom pad bridge does (``game.turn_scale`` degrees per tic at
full camera x, ``game.move_scale`` and ``game.strafe_scale`` speeds, each step
``game.frame_skip`` tics), each step's ``info["position"]`` is where the
player stands in map units (for coverage only), and an episode lasts
``game.episode_steps`` steps.

The picture is a crude first-person view: the floor cells ahead, sampled at a
few distances across a 90 degree field of view, below a band of wall colour.
Each floor cell has its own colour, so walking somewhere new shows colours
not seen before, and the default colour-histogram novelty has something to find.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from explorer.config import GameConfig, ObservationConfig
from explorer.core import Step, clamp
from explorer.envs.ring import FrameRing

#: map units per floor cell (the coverage cell of the built-in game)
CELL = 64.0
#: map units walked per tic at a speed setting of 1 (Doom walks about 8 units a tic at 25)
UNITS_PER_SPEED = 0.32
#: distance of the player to the walls, map units
MARGIN = 16.0


@dataclass(frozen=True)
class Position:
    """Where the player stands, map units, and which way it faces, degrees (measurement only)."""

    x: float
    y: float
    angle: float


class SyntheticEnv:
    """A room of ``cells x cells`` coloured floor cells; an :class:`~explorer.core.Env`.

    Args:
      game: ``episode_steps``, ``frame_skip``, ``turn_scale``, ``move_scale``, ``strafe_scale``
        and ``seed`` (the floor colours and the start of each episode).
      observation: frame size and colour; frames are ``uint8[H, W, C]``.
      stack: frames per observation ``k``.
      ring_capacity: frames the ring holds.
      cells: floor cells along each wall.
    """

    def __init__(self, game: GameConfig, observation: ObservationConfig, stack: int, ring_capacity: int,
                 cells: int = 16):
        self.config = game
        self.stack = stack
        self.grey = observation.grayscale
        self.frame_shape = (observation.height, observation.width, 1 if self.grey else 3)
        self.size = cells * CELL
        self.rng = np.random.default_rng(game.seed)
        # Floor colours, then one colour per wall (outside the room).
        self.colours = self.rng.integers(30, 256, (cells + 2, cells + 2, 3)).astype(np.uint8)
        self.cells = cells
        self.ring = FrameRing(ring_capacity, self.frame_shape)
        h, w = observation.height, observation.width
        floor = h - h // 4
        # Row r of the floor looks this far ahead (near at the bottom); column c this far off centre.
        self._depth = (CELL * 4.0 / (np.arange(floor, 0, -1) / floor + 0.15)).astype(np.float32)[::-1]
        self._spread = np.radians(np.linspace(-45.0, 45.0, w)).astype(np.float32)
        self._sky = h - floor
        self.x = self.y = self.angle = 0.0
        self.t = 0
        self.episode = -1
        self.outcome: str | None = None
        self.cell = CELL  # coverage cell size, map units
        self.episode_budget = game.episode_steps  # agent steps an episode lasts

    def _frame(self) -> np.ndarray:
        h, w, _ = self.frame_shape
        angles = math.radians(self.angle) + self._spread  # [W]
        d = self._depth[:, None]  # [F, 1]
        px = self.x + d * np.cos(angles)[None]
        py = self.y + d * np.sin(angles)[None]
        # Cells outside the room show the wall they lie behind (index 0 or cells + 1).
        cx = np.clip(np.floor(px / CELL).astype(np.int64) + 1, 0, self.cells + 1)
        cy = np.clip(np.floor(py / CELL).astype(np.int64) + 1, 0, self.cells + 1)
        image = np.empty((h, w, 3), np.uint8)
        image[self._sky:] = self.colours[cx, cy]
        image[: self._sky] = self.colours[cx[0], cy[0]] // 2  # the far wall, darker
        if self.grey:
            return (image.astype(np.uint16).sum(-1) // 3).astype(np.uint8)[..., None]
        return image

    def _step(self, first: bool = False, last: bool = False) -> Step:
        return Step(self.ring.latest(self.stack), first=first, last=last, t=time.monotonic(),
                    info={"position": Position(self.x, self.y, self.angle)})

    def reset(self) -> Step:
        self.episode += 1
        self.t = 0
        self.outcome = None
        self.x, self.y = (float(v) for v in self.rng.uniform(MARGIN, self.size - MARGIN, 2))
        self.angle = float(self.rng.uniform(0.0, 360.0))
        self.ring.reset()
        self.ring.push(self._frame())
        return self._step(first=True)

    def step(self, action: np.ndarray | None) -> Step:
        if action is not None:
            self._move(clamp(action))
        self.t += 1
        self.ring.push(self._frame())
        last = self.t >= self.config.episode_steps
        if last:
            self.outcome = "timeout"
        return self._step(last=last)

    def _move(self, a: np.ndarray) -> None:
        c = self.config
        tics = c.frame_skip
        self.angle = (self.angle - a[0] * c.turn_scale * tics) % 360.0  # camera x right turns clockwise
        rad = math.radians(self.angle)
        forward = float(a[3]) * c.move_scale * UNITS_PER_SPEED * tics
        strafe = float(a[2]) * c.strafe_scale * UNITS_PER_SPEED * tics
        self.x += forward * math.cos(rad) + strafe * math.sin(rad)
        self.y += forward * math.sin(rad) - strafe * math.cos(rad)
        self.x = min(max(self.x, MARGIN), self.size - MARGIN)
        self.y = min(max(self.y, MARGIN), self.size - MARGIN)

    def idle(self) -> None:
        time.sleep(0.05)

    def neutral(self) -> None:
        """Nothing is held between steps: an action acts only on the step it is sent with."""

    def stats(self) -> dict[str, Any]:
        return {"episodes_started": self.episode + 1}

    def close(self) -> None:
        pass
