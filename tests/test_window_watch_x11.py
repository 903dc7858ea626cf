"""Linux: a captured X11 window that closes (or changes its title) stops the capture, instead of the
run acting on whatever lies under it (a private Xvfb, a plain X window made here)."""

from __future__ import annotations

import contextlib
import time

import pytest

from explorer.config import load
from explorer.envs.live.capture import CaptureThread
from explorer.envs.live.mss_screen import MssScreen
from explorer.envs.live.screen import ScreenError
from explorer.envs.ring import FrameRing

pytestmark = pytest.mark.display


@pytest.fixture
def x_window(xvfb):
    """A mapped 200x120 top-level window titled 'Watched Game' at 50,40, over a grey desktop."""
    from Xlib import X, display
    d = display.Display()
    root = d.screen().root
    w = root.create_window(50, 40, 200, 120, 0, d.screen().root_depth, X.InputOutput, X.CopyFromParent,
                           background_pixel=d.screen().white_pixel)
    w.set_wm_name("Watched Game")
    w.map()
    d.sync()
    yield d, w
    with contextlib.suppress(Exception):  # a test may have destroyed the window already
        w.destroy()
        d.sync()
    d.close()


def _screen():
    config = load(None, ["capture.source=window", "capture.window_title='watched game'",
                         "capture.window_check_s=0.001"])
    return MssScreen(config.capture, config.observation)


def test_a_closed_window_stops_the_capture_with_a_clear_error(x_window):
    d, w = x_window
    screen = _screen()
    assert (screen.region.left, screen.region.top, screen.region.width, screen.region.height) == (50, 40, 200, 120)
    time.sleep(0.002)
    assert screen.grab_raw().shape == (120, 200, 3)
    assert screen.watch.checks == 1
    w.destroy()
    d.sync()
    capture = CaptureThread(screen, FrameRing(4, screen.shape), fps=100)
    time.sleep(0.002)
    capture._run()  # returns once the grab fails
    assert capture.grabs == 0
    with pytest.raises(ScreenError, match="capture stopped: the captured window 'Watched Game' was closed: stopping "
                                          "rather than acting on whatever is on screen there now"):
        capture.check()


def test_a_window_whose_title_changes_stops_the_capture(x_window):
    d, w = x_window
    screen = _screen()
    w.set_wm_name("Something Else")
    d.sync()
    time.sleep(0.002)
    with pytest.raises(ScreenError, match="is now titled 'Something Else', without 'watched game'"):
        screen.grab_raw()
