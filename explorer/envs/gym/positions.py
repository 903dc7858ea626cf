"""Where the player is in a Gymnasium game, for coverage only (never an agent input).

A reader returns a :class:`Position` (a room and x/y, or x/y/z) or, for a game that reports none,
a :class:`FrameCell`: Go-Explore's domain-agnostic cell, the frame downscaled to 11 x 8 pixels with 8
grey levels (Ecoffet et al., 2021), so coverage counts distinct coarse pictures instead of places.

Known games are read directly: ALE Montezuma's Revenge from its RAM (room ``ram[3]``, x ``ram[42]``,
y ``ram[43]``), MiniGrid from ``agent_pos``. Any other game is read from ``info[game.position_key]``
when it holds 2 or 3 numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

#: Go-Explore's domain-agnostic cell: frame width x height, grey levels
FRAME_CELL = (11, 8, 8)
#: how coverage names a frame cell wherever it is shown
FRAME_CELL_LABEL = "frame cells (Go-Explore's 11x8, 8 grey levels: the game reports no position)"


@dataclass(frozen=True)
class Position:
    """The player's place: ``x``, ``y`` (and ``z``) in the game's units; ``room`` where the game has rooms."""

    x: float
    y: float
    room: int | None = None
    z: float | None = None


@dataclass(frozen=True)
class FrameCell:
    """A coarse picture of the screen standing in for a place (``key``: its 88 grey levels as bytes)."""

    key: bytes


def frame_cell(rgb: np.ndarray) -> FrameCell:
    """Go-Explore's cell of an ``uint8[H, W, 3]`` (or ``[H, W]``) frame: area-downscaled to 11 x 8, 8 grey levels."""
    w, h, levels = FRAME_CELL
    image = Image.fromarray(np.asarray(rgb, np.uint8).squeeze()).convert("L").resize((w, h), Image.Resampling.BOX)
    return FrameCell((np.asarray(image, np.uint8) // (256 // levels)).tobytes())


Reader = Callable[[Any, Mapping[str, Any]], "Position | None"]


def montezuma(env: Any, info: Mapping[str, Any]) -> Position:
    """ALE Montezuma's Revenge: room ``ram[3]``, x ``ram[42]``, y ``ram[43]`` (pixels, y up)."""
    ram = env.unwrapped.ale.getRAM()
    return Position(float(ram[42]), float(ram[43]), room=int(ram[3]))


def minigrid(env: Any, info: Mapping[str, Any]) -> Position:
    """MiniGrid: the agent's grid cell ``agent_pos`` (column, row)."""
    x, y = env.unwrapped.agent_pos
    return Position(float(x), float(y))


def from_info(key: str) -> Reader:
    """``info[key]`` as 2 or 3 numbers (None when the step's info has no such entry)."""
    def read(env: Any, info: Mapping[str, Any]) -> Position | None:
        value = info.get(key)
        if value is None:
            return None
        v = np.asarray(value, np.float64).reshape(-1)
        if v.shape[0] not in (2, 3) or not np.isfinite(v).all():
            return None
        return Position(float(v[0]), float(v[1]), z=float(v[2]) if v.shape[0] == 3 else None)
    return read


def position_reader(game_id: str, key: str) -> tuple[Reader, float]:
    """The reader of a game's position and its own cell size (in the position's units)."""
    name = game_id.rsplit("/", 1)[-1]
    if game_id.startswith("ALE/") and name.startswith("MontezumaRevenge"):
        return montezuma, 16.0
    if name.startswith("MiniGrid-") or name.startswith("BabyAI-"):
        return minigrid, 1.0
    return from_info(key), 1.0
