"""Frames and desktop rectangles shared by every game: observation shape and resizing, regions and windows.

The capture backends (``explorer.envs.live``) and the built-in games
(``explorer.envs.doom``, ``explorer.envs.gym``) shape their frames with
:func:`to_observation`; the capture backends find what they grab as a
:class:`Region` (or a :class:`Window`'s client area).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from explorer.config import ObservationConfig


def to_observation(rgb: np.ndarray, obs: ObservationConfig) -> np.ndarray:
    """Resize an ``uint8[h, w, 3]`` RGB image to the observation shape (area filter)."""
    image = Image.fromarray(rgb)
    if obs.grayscale:
        image = image.convert("L")
    if image.size != (obs.width, obs.height):
        image = image.resize((obs.width, obs.height), Image.Resampling.BOX)
    out = np.asarray(image, dtype=np.uint8)
    return out[..., None] if out.ndim == 2 else out


def observation_shape(obs: ObservationConfig) -> tuple[int, int, int]:
    return (obs.height, obs.width, 1 if obs.grayscale else 3)


@dataclass(frozen=True)
class Region:
    """A desktop rectangle in physical pixels (left/top negative left of or above the primary monitor)."""

    left: int
    top: int
    width: int
    height: int

    def as_mss(self) -> dict[str, int]:
        return {"left": self.left, "top": self.top, "width": self.width, "height": self.height}

    @classmethod
    def from_mss(cls, monitor: dict[str, int]) -> Region:
        return cls(monitor["left"], monitor["top"], monitor["width"], monitor["height"])

    def overlap(self, other: Region) -> int:
        """Pixels this rectangle shares with ``other``."""
        w = min(self.left + self.width, other.left + other.width) - max(self.left, other.left)
        h = min(self.top + self.height, other.top + other.height) - max(self.top, other.top)
        return max(w, 0) * max(h, 0)

    def inside(self, other: Region) -> bool:
        return self.overlap(other) == self.width * self.height


@dataclass
class Window:
    """A window found by title.

    Attributes:
      query: the part of the title it was found by.
      title: its whole title when it was found.
      region: its client area (no frame, no title bar), physical desktop pixels.
      handle: what finds it again: the X11 window id on Linux, else a pywinctl
        window (on Windows its ``getHandle()`` is the HWND).
      minimised: it was minimised when found.
    """

    query: str
    title: str
    region: Region
    handle: Any = field(repr=False)
    minimised: bool = False
