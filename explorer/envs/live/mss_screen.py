"""Capture with ``mss``: GDI on Windows, X11 on Linux."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from explorer.config import CaptureConfig, ObservationConfig
from explorer.envs.geometry import observation_shape, to_observation
from explorer.envs.live import winapi
from explorer.envs.live.desktop import WindowWatch, dpi_aware, resolve_region
from explorer.envs.live.screen import ScreenError


def _mss_blank_hint() -> str:
    if winapi.is_windows():
        return ("mss (GDI) grabs many DirectX and full-screen games as black: run the game in borderless windowed "
                "mode, or set capture.backend = \"dxcam\"")
    return ""


class MssScreen:
    """Grabs a screen region with ``mss``.

    The ``mss`` instance is created lazily in the thread that first grabs
    (``mss`` handles are not shareable across threads), so construct the screen
    anywhere and grab from the capture thread. With ``capture.source =
    "window"`` each grab first checks (every ``capture.window_check_s``) that the
    window is still there.
    """

    backend = "mss"
    note = ""  # why this backend was chosen (set by make_screen)

    def __init__(self, capture: CaptureConfig, obs: ObservationConfig):
        dpi_aware()
        self.capture = capture
        self.obs = obs
        self.shape = observation_shape(obs)
        self._local = threading.local()
        self.region, self.window = resolve_region(capture, self._mss().monitors)
        self.watch = WindowWatch(self.window, capture.window_check_s) if self.window is not None else None
        self.blank_hint = _mss_blank_hint()

    def _mss(self) -> Any:
        sct = getattr(self._local, "sct", None)
        if sct is None:
            import mss
            try:
                sct = mss.MSS() if hasattr(mss, "MSS") else mss.mss()
            except Exception as err:
                raise ScreenError(f"mss cannot open the screen ({err}); on Linux a display is needed (DISPLAY set, or run under Xvfb)") from err
            self._local.sct = sct
        return sct

    def grab_raw(self) -> np.ndarray:
        """The region at full resolution, ``uint8[h, w, 3]`` RGB."""
        if self.watch is not None:
            self.watch.check()
        shot = self._mss().grab(self.region.as_mss())
        bgra = np.frombuffer(shot.bgra, np.uint8).reshape(shot.height, shot.width, 4)
        return bgra[..., 2::-1]

    def grab(self) -> np.ndarray:
        return to_observation(np.ascontiguousarray(self.grab_raw()), self.obs)

    def close(self) -> None:
        sct = getattr(self._local, "sct", None)
        if sct is not None:
            sct.close()
            self._local.sct = None
