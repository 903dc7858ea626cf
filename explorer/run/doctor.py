"""``explorer doctor``: check what a run needs and say how to fix what is missing."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from explorer.config import Config

Check = tuple[str, bool, str]  # name, ok, detail (or how to fix)


def _check(name: str, fn: Callable[[], str]) -> Check:
    try:
        return name, True, fn()
    except Exception as err:
        return name, False, f"{type(err).__name__}: {err}"


def check_tensorflow() -> str:
    import keras
    import tensorflow as tf
    devices = ", ".join(d.device_type for d in tf.config.list_physical_devices())
    x = tf.reduce_sum(tf.ones((2, 2)))
    if float(x) != 4.0:
        raise RuntimeError("TensorFlow computed a wrong sum")
    return f"tensorflow {tf.__version__}, keras {keras.__version__}, devices: {devices}"


def check_game(config: Config) -> str:
    from explorer.envs import make_game
    game = make_game(config.replace(**{"game.realtime": False, "game.visible": False}))
    try:
        frame = game.grab()
        game.advance()
        return f"vizdoom scenario {config.game.scenario!r} runs, frames {frame.shape}"
    finally:
        game.close()


def check_display() -> str:
    if sys.platform.startswith("linux") and not os.environ.get("DISPLAY"):
        raise RuntimeError("DISPLAY is not set: live capture needs an X display "
                           "(run under X11, or 'Xvfb :99 & export DISPLAY=:99' for tests)")
    return os.environ.get("DISPLAY", "desktop session")


def check_capture(config: Config) -> str:
    from explorer.envs.screen import MssScreen
    screen = MssScreen(config.capture, config.observation)
    try:
        raw = screen.grab_raw()
    finally:
        screen.close()
    spread = int(raw.max()) - int(raw.min())
    note = " (uniform: is the game window there?)" if spread <= 2 else ""
    return f"region {screen.region.as_mss()} grabbed {raw.shape[1]}x{raw.shape[0]}{note}"


def check_pad(config: Config) -> str:
    if config.pad.backend != "vgamepad":
        return f"pad.backend = {config.pad.backend!r}: no driver needed"
    from explorer.envs.pad import VGamepadPad
    pad = VGamepadPad(config.pad)
    pad.neutral()
    pad.close()
    return "virtual Xbox 360 pad created and centred"


def check_hotkeys() -> str:
    from pynput import keyboard  # noqa: F401
    return "pynput available: stop and pause keys work"


def run_doctor(config: Config) -> int:
    """Print one line per check; exit status 1 when something a live run needs is missing."""
    checks = [
        _check("tensorflow", check_tensorflow),
        _check("built-in game", lambda: check_game(config)),
        _check("display", check_display),
        _check("capture", lambda: check_capture(config)),
        _check("pad driver", lambda: check_pad(config)),
    ]
    optional = [_check("hotkeys (optional)", check_hotkeys)]
    width = max(len(n) for n, _, _ in checks + optional)
    for name, ok, detail in checks + optional:
        status = "ok" if ok else "missing" if name.endswith("(optional)") else "FAIL"
        print(f"{status:<8} {name:<{width}}  {detail}")
    failed = [n for n, ok, _ in checks if not ok]
    if failed:
        print(f"\n{len(failed)} check(s) failed: {', '.join(failed)}. `explorer explore` needs only tensorflow and the "
              "built-in game; `explorer play` needs all of them (or --dry-run, which needs no pad driver).")
        return 1
    print("\nall checks passed")
    return 0
