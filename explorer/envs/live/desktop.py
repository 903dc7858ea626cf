"""The desktop: DPI awareness, finding a window by title, watching it, and the region a capture config names.

All rectangles are physical desktop pixels; on Windows the process is made
DPI-aware before any window or capture call so that window rectangles and
grabs agree at any display scaling.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from explorer.config import CaptureConfig
from explorer.envs.geometry import Region, Window
from explorer.envs.live import winapi
from explorer.envs.live.screen import ScreenError


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
