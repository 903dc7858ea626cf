"""Capture: the backend ``capture.backend`` picks, and the thread that feeds the frame ring.

:func:`make_screen` chooses between :class:`~explorer.envs.live.mss_screen.MssScreen`
(``mss``: GDI on Windows, X11 on Linux) and, on Windows,
:class:`~explorer.envs.live.dxcam_screen.DxcamScreen` (Desktop Duplication through
``dxcam``, which sees DirectX and full-screen games that GDI grabs as black).
:class:`CaptureThread` grabs from either at a fixed rate into a :class:`FrameRing`.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from typing import Any

from explorer.config import CaptureConfig, ObservationConfig
from explorer.envs.live import winapi
from explorer.envs.live.desktop import dpi_aware
from explorer.envs.live.dxcam_screen import DxcamScreen, DxcamUnavailable
from explorer.envs.live.mss_screen import MssScreen
from explorer.envs.live.screen import OutputLost, Screen, ScreenError
from explorer.envs.ring import FrameRing
from explorer.timing import Pacer


def choose_backend(setting: str) -> tuple[str, str]:
    """The capture backend ``capture.backend`` names here, and why.

    Returns:
      ("mss" or "dxcam", a short reason).

    Raises:
      ScreenError: "dxcam" asked for where it cannot run or is not installed.
    """
    windows = winapi.is_windows()
    installed = importlib.util.find_spec("dxcam") is not None
    if setting == "mss":
        return "mss", "capture.backend = \"mss\""
    if setting == "dxcam":
        if not windows:
            raise ScreenError("capture.backend = \"dxcam\" needs Windows (Desktop Duplication); use \"auto\" or \"mss\" here")
        if not installed:
            raise ScreenError("capture.backend = \"dxcam\" but dxcam is not installed: pip install dxcam "
                              "(explorer installs it on Windows; reinstall explorer if it is missing)")
        return "dxcam", "capture.backend = \"dxcam\""
    if not windows:
        return "mss", "auto: not Windows"
    if not installed:
        return "mss", "auto: dxcam is not installed (pip install dxcam for DirectX-safe capture)"
    return "dxcam", "auto: Windows with dxcam installed"


def make_screen(capture: CaptureConfig, obs: ObservationConfig) -> Screen:
    """The screen ``capture.backend`` picks (see :func:`choose_backend`).

    With "auto", a Desktop Duplication that cannot start (Remote Desktop, some
    virtual machines) falls back to mss; the screen's ``note`` says so.
    """
    dpi_aware()
    backend, why = choose_backend(capture.backend)
    screen: Any
    if backend == "dxcam":
        try:
            screen = DxcamScreen(capture, obs)
        except DxcamUnavailable as err:
            if capture.backend == "dxcam":
                raise
            screen = MssScreen(capture, obs)
            screen.note = f"auto: dxcam could not start ({err}); using mss"
            return screen
    else:
        screen = MssScreen(capture, obs)
    screen.note = why
    return screen


class CaptureThread:
    """Grabs frames from a screen at a fixed rate into a :class:`FrameRing`.

    Errors in the thread are kept and re-raised by :meth:`check` in the caller's
    thread. A stream of uniform frames longer than ``blank_s`` is reported as
    blank (a minimised window, a black region, a game still loading).

    Only new frames enter the ring. A screen that knows its picture did not
    change (dxcam) returns None: that is counted in ``unchanged`` and still
    confirms the ring's newest frame as current, so a game standing still (or
    paused by the player) is not a stalled capture. A screen whose output is
    lost for now raises :class:`OutputLost`: counted in ``lost``, nothing is
    confirmed, and after ``lost_s`` without a picture :meth:`check` raises.

    Attributes:
      grabs: new frames pushed into the ring.
      unchanged: grabs that reported the picture unchanged.
      lost: grabs that found the output lost.
      late: grab slots missed because a grab overran (dropped frames).
      grab_times: monotonic time of every grab that delivered or confirmed the
        ring's newest frame.
    """

    def __init__(self, screen: Screen, ring: FrameRing, fps: float, blank_s: float = 3.0, lost_s: float = 1.0):
        self.screen = screen
        self.ring = ring
        self.period = 1.0 / fps
        self.blank_s = blank_s
        self.lost_s = lost_s
        self.error: BaseException | None = None
        self.grabs = 0
        self.unchanged = 0
        self.lost = 0
        self.lost_reason = ""
        self.late = 0  # grabs that started after their slot had passed (dropped frames)
        self.grab_times: list[float] = []
        self._delivered = threading.Condition()  # notified at each grab that delivered or confirmed a picture
        self._stop = threading.Event()
        self._blank_since: float | None = None
        self._lost_since: float | None = None
        self._uniform = False  # the newest frame is uniform
        self.blank = False
        self._thread = threading.Thread(target=self._run, name="capture", daemon=True)

    def start(self) -> CaptureThread:
        self._thread.start()
        return self

    def wait_for_picture(self, after: float, timeout: float) -> bool:
        """Block until a grab later than monotonic time ``after`` delivered or confirmed a picture, or the
        thread stopped; False when none did within ``timeout`` seconds."""
        def delivered() -> bool:
            times = self.grab_times
            return bool(times) and times[-1] > after or self.error is not None or not self._thread.is_alive()

        with self._delivered:
            return self._delivered.wait_for(delivered, timeout) and bool(self.grab_times) and self.grab_times[-1] > after

    def _run(self) -> None:
        try:
            pacer = Pacer(1.0 / self.period, stop=self._stop)
            while not self._stop.is_set():
                self._grab_once()
                pacer.wait()
                self.late = pacer.missed
        except BaseException as err:
            self.error = err
        finally:
            close = getattr(self.screen, "close_thread", None)
            if close is not None:
                close()

    def _grab_once(self) -> None:
        try:
            frame = self.screen.grab()
        except OutputLost as err:
            self.lost += 1
            self.lost_reason = str(err)
            if self._lost_since is None:
                self._lost_since = time.monotonic()
            return
        self._lost_since = None
        now = time.monotonic()
        if frame is None:
            self.unchanged += 1
            if self.grabs == 0:
                return  # nothing in the ring to confirm yet
        else:
            self.ring.push(frame)
            now = time.monotonic()
            self.grabs += 1
            self._uniform = int(frame.max()) - int(frame.min()) <= 2
        with self._delivered:
            self.grab_times.append(now)
            if len(self.grab_times) > 100_000:
                del self.grab_times[:50_000]
            self._delivered.notify_all()
        self._watch_blank(now)

    def _watch_blank(self, now: float) -> None:
        if not self._uniform:
            self._blank_since = None
            self.blank = False
        elif self._blank_since is None:
            self._blank_since = now
        elif now - self._blank_since >= self.blank_s:
            self.blank = True

    @property
    def blank_for(self) -> float:
        """Seconds the newest frames have been uniform (blank or black); 0 when the newest is not."""
        since = self._blank_since
        return time.monotonic() - since if since is not None and self._uniform else 0.0

    def check(self) -> None:
        """Raise in the caller's thread what went wrong in the capture thread."""
        if self.error is not None:
            if isinstance(self.error, ScreenError):
                raise ScreenError(f"capture stopped: {self.error}") from self.error
            raise ScreenError(f"capture thread stopped: {type(self.error).__name__}: {self.error}") from self.error
        lost_since = self._lost_since
        if lost_since is not None and time.monotonic() - lost_since > self.lost_s:
            raise ScreenError(f"no picture for {time.monotonic() - lost_since:.1f} s: {self.lost_reason}")
        if self.blank:
            hint = getattr(self.screen, "blank_hint", "")
            raise ScreenError(
                f"the captured frames have been uniform (blank or black) for {self.blank_s:.0f} s: is the game window "
                "visible, not minimised and inside the capture region?" + (f" {hint}." if hint else ""))

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)

    def achieved_fps(self) -> float:
        """Grabs per second that delivered or confirmed a picture."""
        t = self.grab_times
        if len(t) < 2:
            return 0.0
        return (len(t) - 1) / (t[-1] - t[0])
