"""Screens: where frames come from, and the capture thread that feeds the ring.

A :class:`Screen` gives ``uint8[H, W, C]`` frames already shaped as observations
(``observation.height`` x ``observation.width``, one grey channel or three RGB).
Two backends grab the desktop: :class:`MssScreen` (``mss``: GDI on Windows, X11
on Linux) and, on Windows, ``explorer.envs.dxscreen.DxcamScreen`` (Desktop
Duplication through ``dxcam``, which sees DirectX and full-screen games that
GDI grabs as black). :func:`make_screen` picks one from ``capture.backend``.

All rectangles are physical desktop pixels; on Windows the process is made
DPI-aware before any window or capture call so that window rectangles and
grabs agree at any display scaling.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from explorer.config import CaptureConfig, ObservationConfig
from explorer.core import ExplorerError, Pacer
from explorer.envs import winapi
from explorer.envs.geometry import Region, Window, observation_shape, to_observation
from explorer.envs.ring import FrameRing


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


def _on_linux() -> bool:
    return sys.platform.startswith("linux") and not winapi.is_windows()


def dpi_aware() -> str:
    """On Windows, make the process per-monitor DPI-aware (once) and return its awareness; "" elsewhere.

    Called before any window lookup or capture, so that window rectangles and
    grabs share physical pixels at any display scaling.
    """
    return winapi.make_dpi_aware() if winapi.is_windows() else ""


def locate_window(title: str) -> Window:
    """The one visible window whose title contains ``title``, with its client area.

    On X11 the window tree is walked with python-xlib, which works with or
    without a window manager (Xvfb included); elsewhere ``pywinctl`` lists the
    windows (on X11 it needs an EWMH window manager and ``xrandr``).

    Raises:
      ScreenError: no window matches, or several do (the candidates are listed), or it is minimised.
    """
    if not title:
        raise ScreenError("capture.source is 'window' but capture.window_title is empty; set it to part of the game window's title")
    dpi_aware()
    windows = _x11_windows() if _on_linux() else _pywinctl_windows()
    matches = [w for w in windows if title.lower() in w.title.lower()]
    if len(matches) != 1:
        names = ", ".join(sorted({repr(w.title) for w in windows})) or "(none)"
        what = "no window" if not matches else f"{len(matches)} windows"
        raise ScreenError(f"{what} with {title!r} in the title; open windows: {names}. "
                          "Set capture.window_title to a part that matches exactly one.")
    window = matches[0]
    if window.minimised:
        raise ScreenError(f"the window {window.title!r} is minimised: restore it (click it in the taskbar) and run again")
    window.query = title
    return window


def find_window(title: str) -> Region:
    """The client area of the one visible window whose title contains ``title`` (see :func:`locate_window`)."""
    return locate_window(title).region


def window_problem(window: Window) -> str | None:
    """What happened to a window found earlier: None while it exists and its title still contains the query."""
    if _on_linux():
        exists, title = _x11_window_state(int(window.handle))
    else:
        try:
            exists = bool(window.handle.isAlive)
            title = str(window.handle.title or "") if exists else ""
        except Exception:  # the handle went stale under us: the window is gone
            exists, title = False, ""
    if not exists:
        return "was closed"
    if window.query.lower() not in title.lower():
        return f"is now titled {title!r}, without {window.query!r}"
    return None


class WindowWatch:
    """Checks, at most every ``period_s``, that a captured window still exists and keeps its title.

    When the game window closes, whatever lies under it would be captured
    instead and the run would act on the wrong picture; :meth:`check` raises
    :class:`ScreenError` then, so the run stops. A check costs a few X11 or
    Win32 calls, hence the rate limit.
    """

    def __init__(self, window: Window, period_s: float, clock: Callable[[], float] = time.monotonic):
        self.window = window
        self.period_s = period_s
        self.checks = 0
        self._clock = clock
        self._next = clock() + period_s

    def check(self) -> None:
        now = self._clock()
        if now < self._next:
            return
        self._next = now + self.period_s
        self.checks += 1
        problem = window_problem(self.window)
        if problem is not None:
            raise ScreenError(f"the captured window {self.window.title!r} {problem}: stopping rather than acting on "
                              "whatever is on screen there now. Start the game again (or fix capture.window_title) "
                              "and rerun")


def focus_check(title: str) -> Callable[[], bool] | None:
    """A cheap ``focused()`` for the window whose title contains ``title`` (Windows only; None elsewhere).

    The window in front is compared by handle (HWND), so another window whose
    title happens to contain ``title`` does not count; when the window cannot
    be found, by title. The answer is refreshed at most every 0.2 s, so calling
    it every tick costs nothing.
    """
    if not winapi.is_windows() or not title:
        return None
    winapi.make_dpi_aware()
    try:
        hwnd = int(locate_window(title).handle.getHandle())
    except (ScreenError, AttributeError, TypeError, ValueError):
        hwnd = 0

    state = {"t": 0.0, "ok": True}

    def focused() -> bool:
        now = time.monotonic()
        if now - state["t"] > 0.2:
            if hwnd:
                state["ok"] = winapi.foreground_window() == hwnd
            else:
                import pywinctl
                active = pywinctl.getActiveWindowTitle() or ""
                state["ok"] = title.lower() in active.lower()
            state["t"] = now
        return bool(state["ok"])

    return focused


def _x11_display() -> Any:
    try:
        from Xlib import display
        from Xlib.error import DisplayError
    except ImportError as err:
        raise ScreenError(f"finding a window on X11 needs python-xlib ({err}): pip install python-xlib") from err
    try:
        return display.Display()
    except DisplayError as err:
        raise ScreenError(f"cannot open the X display to list windows ({err}); is DISPLAY set?") from err


def _x11_name(d: Any, w: Any) -> str:
    prop = w.get_full_property(d.intern_atom("_NET_WM_NAME"), d.intern_atom("UTF8_STRING"))
    name = prop.value.decode("utf-8", "replace") if prop else (w.get_wm_name() or "")
    return name.decode("latin-1") if isinstance(name, bytes) else str(name)


def _x11_windows() -> list[Window]:
    from Xlib import X
    d = _x11_display()
    try:
        root = d.screen().root
        found: list[Window] = []
        stack = list(root.query_tree().children)
        while stack:
            w = stack.pop()
            try:
                attrs = w.get_attributes()
                stack.extend(w.query_tree().children)
                if attrs.map_state != X.IsViewable:
                    continue
                name = _x11_name(d, w)
                if not name:
                    continue
                geo = w.get_geometry()
                pos = w.translate_coords(root, 0, 0)
                found.append(Window("", name, Region(-pos.x, -pos.y, geo.width, geo.height), w.id))
            except Exception:  # a window closed while we walked the tree
                continue
        return found
    finally:
        d.close()


def _x11_window_state(window_id: int) -> tuple[bool, str]:
    """Whether the X11 window still exists, and its title."""
    from Xlib import error
    d = _x11_display()
    try:
        w = d.create_resource_object("window", window_id)
        try:
            w.get_attributes()
            return True, _x11_name(d, w)
        except (error.BadWindow, error.BadDrawable, error.BadMatch):
            return False, ""
    finally:
        d.close()


def _pywinctl_windows() -> list[Window]:
    try:
        import pywinctl
    except (Exception, SystemExit) as err:  # pywinctl exits the process on X11 without xrandr
        raise ScreenError(f"cannot list windows with pywinctl ({type(err).__name__}: {err})") from None
    found = []
    for w in pywinctl.getAllWindows():
        if not w.title or not w.isVisible:
            continue
        box = w.getClientFrame()  # the client area, without the decorations; physical pixels once DPI-aware
        region = Region(int(box.left), int(box.top), int(box.right - box.left), int(box.bottom - box.top))
        found.append(Window("", w.title, region, w, minimised=bool(getattr(w, "isMinimized", False))))
    return found


def resolve_region(capture: CaptureConfig, monitors: list[dict[str, int]]) -> tuple[Region, Window | None]:
    """The desktop rectangle the capture config names, and the window when it names one.

    Args:
      capture: the capture section.
      monitors: mss's monitor list: ``[all monitors together, monitor 1, monitor 2, ...]``,
        each ``{"left", "top", "width", "height"}`` in physical desktop pixels.

    Raises:
      ScreenError: no such monitor or window, or the rectangle is not wholly on the monitors.
    """
    window = None
    if capture.source == "window":
        window = locate_window(capture.window_title)
        region = window.region
    elif capture.source == "monitor":
        if capture.monitor >= len(monitors):
            raise ScreenError(f"capture.monitor = {capture.monitor}, but only monitors 0..{len(monitors) - 1} exist")
        region = Region.from_mss(monitors[capture.monitor])
    else:
        region = Region(capture.left, capture.top, capture.width, capture.height)
    screens = [Region.from_mss(m) for m in monitors[1:]] or [Region.from_mss(monitors[0])]
    if sum(region.overlap(m) for m in screens) != region.width * region.height:  # monitors never overlap
        listed = "; ".join(f"{i}: {m.width}x{m.height} at {m.left},{m.top}" for i, m in enumerate(screens, 1))
        fix = ("move the window wholly onto a monitor" if window is not None
               else "fix capture.left/top/width/height (physical pixels; negative left of or above the primary monitor)")
        raise ScreenError(f"capture region {region} lies outside the screen, at least in part (monitors {listed}): {fix}")
    return region, window


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


def screen_region(screen: Screen) -> dict[str, int] | None:
    """The captured rectangle in desktop pixels (for run summaries); None for a screen without one (a fake)."""
    region = getattr(screen, "region", None)
    return region.as_mss() if isinstance(region, Region) else None


def make_screen(capture: CaptureConfig, obs: ObservationConfig) -> Screen:
    """The screen ``capture.backend`` picks (see :func:`choose_backend`).

    With "auto", a Desktop Duplication that cannot start (Remote Desktop, some
    virtual machines) falls back to mss; the screen's ``note`` says so.
    """
    dpi_aware()
    backend, why = choose_backend(capture.backend)
    screen: Any
    if backend == "dxcam":
        from explorer.envs.dxscreen import DxcamScreen, DxcamUnavailable
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
