"""``explorer doctor``: check what a run needs and say how to fix what is missing.

Each check prints one line: ``ok``, ``FAIL`` (a live run needs it; the line
says what to do), ``warn`` (works, but watch out), ``n/a`` (not on this
platform) or ``missing`` (optional). ``--report FILE`` writes the same lines
with the versions of Python, the OS and every package involved, the monitors
and the capture, pad and control settings, to attach to a bug report.
"""

from __future__ import annotations

import gc
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import tomli_w

from explorer.config import Config
from explorer.core import ExplorerError
from explorer.envs.live import winapi
from explorer.files import atomic_write, remedy

PACKAGES = ("explorer", "tensorflow", "keras", "numpy", "pillow", "mss", "dxcam", "comtypes", "vgamepad",
            "pywinctl", "python-xlib", "vizdoom", "pynput", "pydantic")


@dataclass(frozen=True)
class Check:
    """One line of the doctor's answer."""

    name: str
    status: str  # "ok", "FAIL", "warn", "n/a" or "missing"
    detail: str


class Problem(Exception):
    """A check failed; the message says what to do."""


class Caution(Exception):
    """A check passed with something to watch out for."""


class NotHere(Exception):
    """A check that does not apply on this platform or with this config."""


def _check(name: str, fn: Callable[[], str], required: bool = True) -> Check:
    try:
        return Check(name, "ok", fn())
    except Problem as err:
        return Check(name, "FAIL" if required else "missing", str(err))
    except Caution as err:
        return Check(name, "warn", str(err))
    except NotHere as err:
        return Check(name, "n/a", str(err))
    except Exception as err:
        return Check(name, "FAIL" if required else "missing", f"{type(err).__name__}: {err}")


def _windows() -> bool:
    return winapi.is_windows()


# ---------------------------------------------------------------- checks

def check_tensorflow() -> str:
    import keras
    import tensorflow as tf
    devices = ", ".join(f"{d.device_type} ({d.name})" for d in tf.config.list_physical_devices())
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
    if sys.platform.startswith("linux") and not _windows() and not os.environ.get("DISPLAY"):
        raise Problem("DISPLAY is not set: live capture needs an X display "
                      "(run under X11, or 'Xvfb :99 & export DISPLAY=:99' for tests)")
    return os.environ.get("DISPLAY", "") if not _windows() else "Windows desktop session"


def monitors() -> list[dict[str, int]]:
    """mss's monitor list (0 = all together), physical desktop pixels."""
    import mss
    sct = mss.MSS() if hasattr(mss, "MSS") else mss.mss()
    try:
        return [dict(m) for m in sct.monitors]
    finally:
        sct.close()


def check_scaling() -> str:
    """Windows: the process is per-monitor DPI-aware, so rectangles and grabs agree at any scaling."""
    if not _windows():
        raise NotHere("Windows only (X11 has no per-process display scaling)")
    awareness = winapi.make_dpi_aware()
    scales, listed = [], []
    for i, m in enumerate(monitors()[1:], 1):
        scale = winapi.monitor_scale(m["left"] + m["width"] // 2, m["top"] + m["height"] // 2)
        scales.append(scale)
        listed.append(f"{i}: {m['width']}x{m['height']} at {m['left']},{m['top']} ({scale:.0%})")
    text = f"DPI awareness {awareness}; monitors {'; '.join(listed) or '(none)'}"
    if awareness == "per-monitor":
        return text
    if awareness == "system" and len(set(scales)) <= 1:
        raise Caution(f"{text}: fine while every monitor has the same scaling")
    raise Problem(f"{text}: window rectangles on a monitor scaled differently from the primary will be off. "
                  "Something made the process DPI-aware before explorer could; report it with --report")


def check_capture(config: Config) -> str:
    from explorer.envs.live.capture import make_screen
    screen: Any = make_screen(config.capture, config.observation)
    try:
        raw = screen.grab_raw()
    finally:
        screen.close()
    where = f"{screen.backend} ({screen.note}), region {screen.region.as_mss()}"
    window = screen.window
    if window is not None:
        where += f", the client area of window {window.title!r}"
    if raw is None:
        raise Problem(f"{where}: no picture within a second; is anything moving on that monitor?")
    spread = int(raw.max()) - int(raw.min())
    if spread > 2:
        return f"{where}: grabbed {raw.shape[1]}x{raw.shape[0]}, not uniform"
    fix = screen.blank_hint or "is the game window there, visible and not minimised?"
    if window is None:
        return f"{where}: grabbed {raw.shape[1]}x{raw.shape[0]}, uniform (value {int(raw.min())}): {fix}"
    raise Problem(f"{where}: the grab is uniform (value {int(raw.min())}), the classic symptom of a DirectX or "
                  f"full-screen game grabbed with GDI: {fix}")


def check_focus(config: Config) -> str:
    if not _windows():
        raise NotHere("Windows only")
    if config.capture.source != "window":
        raise NotHere("capture.source is not 'window'")
    from explorer.envs.live.desktop import locate_window
    winapi.make_dpi_aware()
    window = locate_window(config.capture.window_title)
    hwnd = int(window.handle.getHandle())
    if winapi.foreground_window() == hwnd:
        return f"{window.title!r} is in front"
    pause = ("acting pauses, sticks centred, while it is not in front (control.pause_unfocused)"
             if config.control.pause_unfocused else "control.pause_unfocused is off: the pad acts even then")
    raise Caution(f"{window.title!r} is not in front now (normal while this terminal is); during a run {pause}: "
                   "click the game window after the countdown starts")


def check_vigembus() -> str:
    if not _windows():
        raise NotHere("Windows only (Linux uses /dev/uinput)")
    installer = winapi.vigembus_installer()
    get = f"{installer}, or {winapi.VIGEMBUS_URL}" if installer is not None else winapi.VIGEMBUS_URL
    driver = winapi.vigembus()
    if driver is None:
        raise Problem(f"ViGEmBus is not installed: install it ({get}) and reboot")
    if driver.version != "unknown" and driver.version_tuple[:2] < winapi.VIGEMBUS_MIN:
        raise Problem(f"{driver.name} {driver.version} is older than vgamepad needs (1.17.333 or later): uninstall it, "
                      f"install the current one ({get}) and reboot")
    return f"{driver.name} {driver.version}"


def _poll(fn: Callable[[], Any], timeout_s: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        got = fn()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.02)


def check_pad(config: Config) -> str:
    if config.pad.backend != "vgamepad":
        return f"pad.backend = {config.pad.backend!r}: no driver needed"
    if _windows():
        return _check_pad_windows(config)
    return _check_pad_linux(config)


#: the uinput axes of a virtual Xbox 360 pad on Linux: sticks (centred at 0, or -1 where vgamepad mirrors the xpad
#: driver's inverted y), triggers and the d-pad (0 at rest)
_STICKS = ("ABS_X", "ABS_Y", "ABS_RX", "ABS_RY")


def _check_pad_linux(config: Config) -> str:
    """Plug a pad in (a uinput device), move it, centre it and read back what the device was sent, unplug it and
    see its device node go."""
    from explorer.envs.live.pad import VGamepadPad
    pad = VGamepadPad(config.pad)  # plugs in a uinput device
    device = pad.gamepad.uinput
    node = getattr(device, "devnode", None)
    plugged = node is not None and os.path.exists(node)
    sent: list[dict[str, int]] = []
    send_events = [device.send_events]  # let go of before unplugging: it holds the device

    def record(events: Any) -> Any:
        sent.append({e.code.name: int(e.value) for e in events})
        return send_events[0](events)

    try:
        device.send_events = record
        pad.send(np.full(4 + len(config.pad.buttons), 0.5, np.float32))  # sticks half over, buttons pressed
        moved = dict(sent[-1]) if sent else {}
        sent.clear()
        pad.neutral()
    finally:
        device.send_events = send_events[0]
        pad.neutral()
    last: dict[str, int] = {}
    for report in sent:
        last.update(report)
    off = {name: value for name, value in last.items()
           if (abs(value) > 1 if name in _STICKS else value != 0)}
    send_events.clear()
    del pad, device
    gc.collect()  # vgamepad removes the device when the gamepad object goes
    if not any(abs(moved.get(axis, 0)) > 1 for axis in _STICKS) or not last or off:
        raise Problem(f"the pad was plugged in, but after centring it the device was sent {off or last or 'nothing'} "
                      f"(moved: {moved or 'nothing sent'}): report it with --report")
    where = f" as {node}" if plugged else ""
    centred = "centred (the device was sent sticks at 0, buttons and triggers released)"
    if plugged and not _poll(lambda: not os.path.exists(str(node))):
        raise Caution(f"virtual Xbox 360 pad plugged in{where} and {centred}, but {node} is still there after it "
                      "was unplugged: restart the game if it sees an extra pad")
    unplugged = f"unplugged ({node} is gone)" if plugged else "unplugged (no device node seen, so not checked)"
    return f"virtual Xbox 360 pad plugged in{where}, {centred} and {unplugged}"


def _check_pad_windows(config: Config) -> str:
    """Plug a pad in, see XInput (what games read) report it and a stick value, centre it, unplug it."""
    from explorer.envs.live.pad import VGamepadPad
    before = set(winapi.xinput_pads())
    try:
        import vgamepad  # connects to ViGEmBus on import
        gamepad = vgamepad.VX360Gamepad()
    except Exception as err:
        raise Problem(f"no virtual pad ({type(err).__name__}: {err}): {winapi.vigem_hint(err)}") from None
    pad = VGamepadPad(config.pad, gamepad=gamepad)
    try:
        new = _poll(lambda: set(winapi.xinput_pads()) - before)
        if not new:
            raise Problem("the pad was created but XInput does not list it: reboot (ViGEmBus needs one after "
                          "installing), and close other pad tools (DS4Windows, Steam Input)")
        slot = min(new)
        axis = 0 if config.pad.walk_stick == "left" else 2
        pad.send(np.array([0.0, 0.0, 0.5, 0.0], np.float32))  # walk x half right, for a moment
        seen = _poll(lambda: abs(winapi.xinput_pads().get(slot, (0, 0, 0, 0))[axis] - 16384) <= 2)
        pad.neutral()
        if not seen:
            raise Problem(f"XInput slot {slot + 1} shows the pad but not the stick value sent: reinstall ViGEmBus")
    finally:
        pad.neutral()
        del pad, gamepad
        gc.collect()  # vgamepad unplugs the pad when the gamepad object goes
    if not _poll(lambda: slot not in winapi.xinput_pads()):
        raise Caution(f"pad plugged in as XInput player {slot + 1} and the stick reached it, but it was not "
                       "unplugged: restart the game if it still sees an extra pad")
    return f"plugged in as XInput player {slot + 1}, a stick value reached XInput, centred and unplugged"


def check_hotkeys(config: Config) -> str:
    """Start the real stop/pause key listener with the configured keys and hand it a press of each."""
    from explorer.run.driver import Controls
    from explorer.run.safety import Hotkeys

    control = config.control
    controls = Controls()  # switches of no run: the presses below stop and pause nothing else
    hotkeys = Hotkeys(controls, control.stop_key, control.pause_key).start()
    try:
        if not hotkeys.available:
            fix = ("pip install -e '.[hotkeys]'" if not _installed("pynput")
                   else "run where the keyboard can be listened to (an X display, a Windows desktop session)")
            raise Problem(f"{hotkeys.reason}: a live run would have no stop or pause key, only Ctrl-C; {fix}")
        from pynput import keyboard
        stop, pause = hotkeys.keys(keyboard)
        hotkeys.press(pause)
        paused = controls.paused.is_set() and not controls.stop.is_set()
        hotkeys.press(pause)
        resumed = not controls.paused.is_set()
        hotkeys.press(stop)
        if not (paused and resumed and controls.stop.is_set()):
            raise Problem(f"the listener runs, but a press of {control.stop_key!r} or {control.pause_key!r} as pynput "
                          f"reports it did not stop or pause (stopped {controls.stop.is_set()}, paused {paused}, "
                          f"resumed {resumed}): report it with --report")
    finally:
        hotkeys.stop()
    return (f"listening to the keyboard; a press of {control.stop_key!r} (as pynput reports it: {stop}) stops a run "
            f"and {control.pause_key!r} ({pause}) pauses and resumes it")


# ---------------------------------------------------------------- the run

def run_checks(config: Config) -> tuple[list[Check], list[Check]]:
    """The required checks and the optional ones, in the order they are printed."""
    from explorer.envs.live.desktop import dpi_aware
    dpi_aware()  # before anything reads window or monitor geometry
    checks = [
        _check("tensorflow", check_tensorflow),
        _check("built-in game", lambda: check_game(config)),
        _check("display", check_display),
        _check("dpi scaling", check_scaling),
        _check("capture", lambda: check_capture(config)),
        _check("window focus", lambda: check_focus(config)),
        _check("vigembus", check_vigembus),
        _check("pad driver", lambda: check_pad(config)),
    ]
    optional = [_check("hotkeys (optional)", lambda: check_hotkeys(config), required=False)]
    return checks, optional


def _installed(package: str) -> bool:
    try:
        metadata.version(package)
        return True
    except metadata.PackageNotFoundError:
        return False


def versions() -> dict[str, str]:
    """Python, the OS and each package involved, with their versions ("-" when not installed)."""
    out = {"python": sys.version.split()[0], "os": platform.platform(), "machine": platform.machine()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "-"
    return out


def _lines(checks: list[Check]) -> list[str]:
    width = max(len(c.name) for c in checks)
    return [f"{c.status:<8} {c.name:<{width}}  {c.detail}" for c in checks]


def write_report(path: str | Path, config: Config, checks: list[Check]) -> Path:
    """Write the checks, versions, monitors and the capture/pad/control settings to ``path`` (Markdown)."""
    path = Path(path)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    text = [f"# explorer doctor report, {now}", "", "## Checks", "", "```", *_lines(checks), "```", "",
            "## Versions", "", *[f"- {k}: {v}" for k, v in versions().items()], "", "## Monitors", ""]
    try:
        text += [f"- {i}: {m['width']}x{m['height']} at {m['left']},{m['top']}" + (" (all together)" if i == 0 else "")
                 for i, m in enumerate(monitors())]
    except Exception as err:
        text.append(f"- cannot list monitors: {type(err).__name__}: {err}")
    settings = {k: v for k, v in config.to_dict().items() if k in ("capture", "pad", "control")}
    text += ["", "## Settings", "", "```toml", tomli_w.dumps(settings).strip(), "```", ""]
    _check_report_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, "\n".join(text))
    except OSError as err:
        raise ExplorerError(f"cannot write the report {path}: {err.strerror or err}; "
                            f"{remedy(err, 'give another file (--report FILE)')}") from None
    return path


def _check_report_path(path: Path) -> None:
    """Raise a one-line :class:`ExplorerError` when ``path`` cannot be the report file (a folder, or under a file)."""
    if path.is_dir():
        raise ExplorerError(f"--report {path} is a folder; give the file to write the report to, e.g. {path / 'doctor.md'}")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ExplorerError(f"--report {path}: {parent} is a file, not a folder; give another file (--report FILE)")
            break


def run_doctor(config: Config, report: str | Path | None = None) -> int:
    """Print one line per check; exit status 1 when something a live run needs is missing.

    Args:
      config: the merged config (capture and pad settings are checked as configured).
      report: also write everything, with versions, to this file.
    """
    if report is not None:
        _check_report_path(Path(report))  # said before the checks, which take a while
    checks, optional = run_checks(config)
    for line in _lines(checks + optional):
        print(line)
    if report is not None:
        print(f"\nreport written to {write_report(report, config, checks + optional)}")
    failed = [c.name for c in checks if c.status == "FAIL"]
    if failed:
        print(f"\n{len(failed)} check(s) failed: {', '.join(failed)}. `explorer explore` needs only tensorflow and the "
              "built-in game; `explorer play` needs all of them (or --dry-run, which needs no pad driver).")
        return 1
    print("\nall checks passed")
    return 0
