"""Live-mode safety: the countdown before taking the pad, and the stop/pause hotkeys."""

from __future__ import annotations

import sys
import time
from typing import Any

from explorer.run.driver import Controls


def countdown(seconds: float, controls: Controls, out: Any = sys.stderr) -> bool:
    """Count down before live mode takes control; False if a stop came meanwhile."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        print(f"\rtaking the pad in {left:4.1f} s — switch to the game window now", end="", file=out, flush=True)
        if controls.stop.wait(min(0.1, left)):
            print(file=out)
            return False
    if seconds > 0:
        print("\rtaking the pad now" + " " * 40, file=out, flush=True)
    return True


class Hotkeys:
    """Global stop and pause keys through ``pynput`` (``pip install 'explorer[hotkeys]'``).

    Without ``pynput``, or without a keyboard to listen to, live mode still
    stops on Ctrl-C and SIGTERM; :attr:`available` says which case holds and
    :attr:`reason` why.
    """

    def __init__(self, controls: Controls, stop_key: str, pause_key: str):
        self.controls = controls
        self.stop_key = stop_key.lower()
        self.pause_key = pause_key.lower()
        self.available = False
        self.reason = ""
        self._listener: Any = None

    def start(self) -> Hotkeys:
        try:
            from pynput import keyboard
        except Exception as err:  # not installed, or no display to listen on
            self.reason = f"pynput unavailable ({type(err).__name__}: {err})"
            return self

        def name(key: Any) -> str:
            return str(getattr(key, "name", None) or getattr(key, "char", "") or "").lower()

        def on_press(key: Any) -> None:
            pressed = name(key)
            if pressed == self.stop_key:
                self.controls.request_stop(f"stop key {self.stop_key}")
            elif pressed == self.pause_key:
                self.controls.toggle_pause()

        try:
            self._listener = keyboard.Listener(on_press=on_press, daemon=True)
            self._listener.start()
            self.available = True
        except Exception as err:
            self.reason = f"cannot listen to the keyboard ({type(err).__name__}: {err})"
        return self

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.stop()
