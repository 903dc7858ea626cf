"""The stop and pause keys on X11: stopping them lets go of the display at once."""

from __future__ import annotations

import sys
import threading

import pytest

from explorer.run.driver import Controls
from explorer.run.safety import Hotkeys

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="X11")


def test_stopped_hotkeys_leave_no_thread_reading_the_display(xvfb):
    pytest.importorskip("pynput")
    before = set(threading.enumerate())
    hotkeys = Hotkeys(Controls(), "f12", "f11").start()
    assert hotkeys.available, hotkeys.reason
    listener = hotkeys._listener
    listener.wait()  # listening
    hotkeys.stop()
    # its thread used to read on until the next key, and print a traceback once the display closed
    assert not listener.is_alive()
    assert [t for t in set(threading.enumerate()) - before if t.is_alive()] == []
