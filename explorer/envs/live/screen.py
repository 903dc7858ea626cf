"""Screens: where live frames come from, and what goes wrong with them.

A :class:`Screen` gives ``uint8[H, W, C]`` frames already shaped as observations
(``observation.height`` x ``observation.width``, one grey channel or three RGB).
The backends are :mod:`explorer.envs.live.mss_screen` and
:mod:`explorer.envs.live.dxcam_screen`; :func:`explorer.envs.live.capture.make_screen`
picks one.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from explorer.core import ExplorerError
from explorer.envs.geometry import Region


class ScreenError(ExplorerError):
    """Frames cannot be captured; the message says why and how to fix it."""


class OutputLost(ScreenError):
    """The screen has no picture for now (a lost Desktop Duplication output); it keeps trying."""


@runtime_checkable
class Screen(Protocol):
    """Something that gives frames."""

    shape: tuple[int, int, int]

    def grab(self) -> np.ndarray | None:
        """The current frame, ``uint8[H, W, C]``; None when the backend knows the picture is unchanged.

        Raises:
          OutputLost: no picture for now (the capture thread counts it and grabs again).
          ScreenError: capture cannot go on (the message says why).
        """

    def close(self) -> None:
        """Release the screen."""


def screen_region(screen: Screen) -> dict[str, int] | None:
    """The captured rectangle in desktop pixels (for run summaries); None for a screen without one (a fake)."""
    region = getattr(screen, "region", None)
    return region.as_mss() if isinstance(region, Region) else None
