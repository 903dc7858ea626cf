"""Screens: where frames come from, and the capture thread that feeds the ring.

A :class:`Screen` gives ``uint8[H, W, C]`` frames already shaped as observations
(``observation.height`` x ``observation.width``, one grey channel or three RGB).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from PIL import Image

from explorer.config import CaptureConfig, ObservationConfig
from explorer.core import ExplorerError, Pacer
from explorer.envs.ring import FrameRing


class ScreenError(ExplorerError):
    """Frames cannot be captured; the message says why and how to fix it."""


@runtime_checkable
class Screen(Protocol):
    """Something that gives frames."""

    shape: tuple[int, int, int]

    def grab(self) -> np.ndarray:
        """The current frame, ``uint8[H, W, C]``."""

    def close(self) -> None:
        """Release the screen."""


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
    """A screen rectangle in pixels."""

    left: int
    top: int
    width: int
    height: int

    def as_mss(self) -> dict[str, int]:
        return {"left": self.left, "top": self.top, "width": self.width, "height": self.height}


def find_window(title: str) -> Region:
    """The on-screen rectangle of the one visible window whose title contains ``title``.

    On X11 the window tree is walked with python-xlib, which works with or
    without a window manager (Xvfb included); elsewhere ``pywinctl`` lists the
    windows (on X11 it needs an EWMH window manager and ``xrandr``).

    Raises:
      ScreenError: no window matches, or several do (the candidates are listed).
    """
    if not title:
        raise ScreenError("capture.source is 'window' but capture.window_title is empty; set it to part of the game window's title")
    windows = _x11_windows() if sys.platform.startswith("linux") else _pywinctl_windows()
    matches = [(name, region) for name, region in windows if title.lower() in name.lower()]
    if len(matches) != 1:
        names = ", ".join(sorted({repr(name) for name, _ in windows})) or "(none)"
        what = "no window" if not matches else f"{len(matches)} windows"
        raise ScreenError(f"{what} with {title!r} in the title; open windows: {names}. "
                          "Set capture.window_title to a part that matches exactly one.")
    return matches[0][1]


def focus_check(title: str) -> Callable[[], bool] | None:
    """A cheap ``focused()`` for the window whose title contains ``title`` (Windows only; None elsewhere).

    The answer is refreshed at most every 0.2 s, so calling it every tick costs nothing.
    """
    if sys.platform != "win32" or not title:
        return None
    import pywinctl

    state = {"t": 0.0, "ok": True}

    def focused() -> bool:
        now = time.monotonic()
        if now - state["t"] > 0.2:
            active = pywinctl.getActiveWindowTitle() or ""
            state["ok"], state["t"] = title.lower() in active.lower(), now
        return bool(state["ok"])

    return focused


def _x11_windows() -> list[tuple[str, Region]]:
    try:
        from Xlib import X, display
        from Xlib.error import DisplayError
    except ImportError as err:
        raise ScreenError(f"finding a window on X11 needs python-xlib ({err}): pip install python-xlib") from err
    try:
        d = display.Display()
    except DisplayError as err:
        raise ScreenError(f"cannot open the X display to list windows ({err}); is DISPLAY set?") from err
    try:
        root = d.screen().root
        net_name = d.intern_atom("_NET_WM_NAME")
        utf8 = d.intern_atom("UTF8_STRING")
        found: list[tuple[str, Region]] = []
        stack = list(root.query_tree().children)
        while stack:
            w = stack.pop()
            try:
                attrs = w.get_attributes()
                stack.extend(w.query_tree().children)
                if attrs.map_state != X.IsViewable:
                    continue
                prop = w.get_full_property(net_name, utf8)
                name = prop.value.decode("utf-8", "replace") if prop else (w.get_wm_name() or "")
                if isinstance(name, bytes):
                    name = name.decode("latin-1")
                if not name:
                    continue
                geo = w.get_geometry()
                pos = w.translate_coords(root, 0, 0)
                found.append((name, Region(-pos.x, -pos.y, geo.width, geo.height)))
            except Exception:  # a window closed while we walked the tree
                continue
        return found
    finally:
        d.close()


def _pywinctl_windows() -> list[tuple[str, Region]]:
    try:
        import pywinctl
    except (Exception, SystemExit) as err:  # pywinctl exits the process on X11 without xrandr
        raise ScreenError(f"cannot list windows with pywinctl ({type(err).__name__}: {err})") from None
    found = []
    for w in pywinctl.getAllWindows():
        if not w.title or not w.isVisible:
            continue
        box = w.getClientFrame()  # the client area, without the decorations
        found.append((w.title, Region(int(box.left), int(box.top), int(box.right - box.left), int(box.bottom - box.top))))
    return found


def _inside(region: Region, screen: dict[str, int]) -> bool:
    return (region.left >= screen["left"] and region.top >= screen["top"]
            and region.left + region.width <= screen["left"] + screen["width"]
            and region.top + region.height <= screen["top"] + screen["height"])


class MssScreen:
    """Grabs a screen region with ``mss``.

    The ``mss`` instance is created lazily in the thread that first grabs
    (``mss`` handles are not shareable across threads), so construct the screen
    anywhere and grab from the capture thread.
    """

    def __init__(self, capture: CaptureConfig, obs: ObservationConfig):
        self.capture = capture
        self.obs = obs
        self.shape = observation_shape(obs)
        self._local = threading.local()
        self.region = self._resolve_region()

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

    def _resolve_region(self) -> Region:
        c = self.capture
        monitors = self._mss().monitors
        if c.source == "window":
            region = find_window(c.window_title)
        elif c.source == "monitor":
            if c.monitor >= len(monitors):
                raise ScreenError(f"capture.monitor = {c.monitor}, but only monitors 0..{len(monitors) - 1} exist")
            m = monitors[c.monitor]
            region = Region(m["left"], m["top"], m["width"], m["height"])
        else:
            region = Region(c.left, c.top, c.width, c.height)
        everything = monitors[0]
        if not _inside(region, everything):
            raise ScreenError(
                f"capture region {region} lies outside the screen ({everything['width']}x{everything['height']} at "
                f"{everything['left']},{everything['top']}); fix capture.left/top/width/height")
        return region

    def grab_raw(self) -> np.ndarray:
        """The region at full resolution, ``uint8[h, w, 3]`` RGB."""
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


class CaptureThread:
    """Grabs frames from a screen at a fixed rate into a :class:`FrameRing`.

    Errors in the thread are kept and re-raised by :meth:`check` in the caller's
    thread. A stream of uniform frames longer than ``blank_s`` is reported as
    blank (a minimised window, a black region, a game still loading).
    """

    def __init__(self, screen: Screen, ring: FrameRing, fps: float, blank_s: float = 3.0):
        self.screen = screen
        self.ring = ring
        self.period = 1.0 / fps
        self.blank_s = blank_s
        self.error: BaseException | None = None
        self.grabs = 0
        self.late = 0  # grabs that started after their slot had passed (dropped frames)
        self.grab_times: list[float] = []  # monotonic time each frame reached the ring
        self._stop = threading.Event()
        self._blank_since: float | None = None
        self.blank = False
        self._thread = threading.Thread(target=self._run, name="capture", daemon=True)

    def start(self) -> CaptureThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            pacer = Pacer(1.0 / self.period, stop=self._stop)
            while not self._stop.is_set():
                frame = self.screen.grab()
                self.ring.push(frame)
                now = time.monotonic()
                self.grab_times.append(now)
                if len(self.grab_times) > 100_000:
                    del self.grab_times[:50_000]
                self.grabs += 1
                self._watch_blank(frame, now)
                pacer.wait()
                self.late = pacer.missed
        except BaseException as err:
            self.error = err
        finally:
            close = getattr(self.screen, "close_thread", None)
            if close is not None:
                close()

    def _watch_blank(self, frame: np.ndarray, now: float) -> None:
        uniform = int(frame.max()) - int(frame.min()) <= 2
        if not uniform:
            self._blank_since = None
            self.blank = False
        elif self._blank_since is None:
            self._blank_since = now
        elif now - self._blank_since >= self.blank_s:
            self.blank = True

    def check(self) -> None:
        """Raise in the caller's thread what went wrong in the capture thread."""
        if self.error is not None:
            raise ScreenError(f"capture thread stopped: {type(self.error).__name__}: {self.error}") from self.error
        if self.blank:
            raise ScreenError(
                f"the captured frames have been uniform (blank or black) for {self.blank_s:.0f} s: is the game window "
                "visible, not minimised and inside the capture region?")

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)

    def achieved_fps(self) -> float:
        t = self.grab_times
        if len(t) < 2:
            return 0.0
        return (len(t) - 1) / (t[-1] - t[0])
