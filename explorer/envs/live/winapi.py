"""Windows: DPI awareness, monitor scaling, the foreground window, ViGEmBus and XInput.

Every call goes through ``ctypes.windll`` or ``winreg``, looked up when first
needed (never at import, so ``import explorer`` works anywhere) through
:func:`windll` and :func:`registry`. Tests replace those two with fakes that
take the same calls.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2: window rectangles and screen grabs in
# physical pixels on every monitor, whatever each monitor's scaling.
PER_MONITOR_AWARE_V2 = -4
PROCESS_PER_MONITOR_DPI_AWARE = 2  # shcore's older (Windows 8.1) name for the same
AWARENESS = {0: "unaware", 1: "system", 2: "per-monitor"}
VIGEMBUS_MIN = (1, 17)  # vgamepad's client library talks to ViGEmBus 1.17.333 and later
VIGEMBUS_URL = "https://github.com/nefarius/ViGEmBus/releases"
XUSER_MAX_COUNT = 4  # XInput slots

_state: dict[str, str] = {}


def is_windows() -> bool:
    """True on Windows (tests turn it on with a fake desktop)."""
    return sys.platform == "win32"


class _Dlls:
    """DLLs loaded for explorer alone, by attribute (``user32``, ``shcore``, ``xinput1_4``).

    Private handles rather than the shared ``ctypes.windll``: the ``restype``
    and ``argtypes`` set here must not change what other packages get from
    the same functions.
    """

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        dll = ctypes.WinDLL(name)  # type: ignore[attr-defined,unused-ignore]  # OSError when absent
        setattr(self, name, dll)
        return dll


_dlls = _Dlls()


def windll() -> Any:
    """The Windows DLLs explorer calls: ``windll().user32``, ``.shcore``, ``.xinput1_4``, like ``ctypes.windll``."""
    return _dlls


def registry() -> Any:
    """The ``winreg`` module."""
    import winreg
    return winreg


def make_dpi_aware() -> str:
    """Make this process per-monitor DPI-aware, once; return the awareness it ends with.

    Window rectangles and screen grabs then share physical pixels at any
    display scaling (125 %, 150 %) and on every monitor. This must run before
    anything reads window or monitor geometry: a process's awareness is fixed by
    the first call that sets it, and importing pywinctl or pyautogui sets
    'system' awareness (right on the primary monitor only) when nothing did
    before.

    Returns:
      "per-monitor", "system", "unaware" or "unknown".
    """
    if "awareness" in _state:
        return _state["awareness"]
    dll = windll()
    user32 = dll.user32
    done = dpi_awareness() == "per-monitor"
    if not done:
        try:
            set_context = user32.SetProcessDpiAwarenessContext  # Windows 10 1703 and later
            set_context.argtypes = [ctypes.c_void_p]
            set_context.restype = ctypes.c_int
            done = bool(set_context(ctypes.c_void_p(PER_MONITOR_AWARE_V2)))
        except AttributeError:
            pass
    if not done:
        with contextlib.suppress(AttributeError, OSError):  # Windows 8.1
            done = dll.shcore.SetProcessDpiAwareness(PROCESS_PER_MONITOR_DPI_AWARE) == 0  # S_OK
    if not done and dpi_awareness() in ("unaware", "unknown"):
        user32.SetProcessDPIAware()  # Vista: system awareness, better than none
    _state["awareness"] = dpi_awareness()
    return _state["awareness"]


def dpi_awareness() -> str:
    """The awareness the calling thread has now: "per-monitor", "system", "unaware" or "unknown"."""
    user32 = windll().user32
    try:
        get_context = user32.GetThreadDpiAwarenessContext
        get_context.restype = ctypes.c_void_p
        get_awareness = user32.GetAwarenessFromDpiAwarenessContext
        get_awareness.argtypes = [ctypes.c_void_p]
        get_awareness.restype = ctypes.c_int
        return AWARENESS.get(int(get_awareness(get_context())), "unknown")
    except AttributeError:  # before Windows 10 1607
        return "unknown"


class POINT(ctypes.Structure):
    _fields_ = [("x", ctypes.c_long), ("y", ctypes.c_long)]


def monitor_scale(x: int, y: int) -> float:
    """Display scaling of the monitor holding desktop point (x, y): 1.0 at 100 %, 1.5 at 150 %.

    Args:
      x: desktop x, physical pixels.
      y: desktop y, physical pixels.
    """
    dll = windll()
    monitor_from_point = dll.user32.MonitorFromPoint
    monitor_from_point.argtypes = [POINT, ctypes.c_uint32]
    monitor_from_point.restype = ctypes.c_void_p
    handle = monitor_from_point(POINT(x, y), 2)  # MONITOR_DEFAULTTONEAREST
    dpi_x, dpi_y = ctypes.c_uint(), ctypes.c_uint()
    if dll.shcore.GetDpiForMonitor(ctypes.c_void_p(handle), 0, ctypes.byref(dpi_x), ctypes.byref(dpi_y)) != 0:
        return float("nan")
    return dpi_x.value / 96.0  # MDT_EFFECTIVE_DPI; 96 dpi is 100 %


def foreground_window() -> int:
    """Handle (HWND) of the window in front, 0 when none."""
    get = windll().user32.GetForegroundWindow
    get.restype = ctypes.c_void_p
    return int(get() or 0)


# ---------------------------------------------------------------- ViGEmBus and XInput

@dataclass(frozen=True)
class InstalledDriver:
    """An installed driver as Windows lists it under Apps (the uninstall registry)."""

    name: str
    version: str

    @property
    def version_tuple(self) -> tuple[int, ...]:
        parts = []
        for part in self.version.split("."):
            if not part.isdigit():
                break
            parts.append(int(part))
        return tuple(parts)


_UNINSTALL = (r"SOFTWARE\Microsoft\Windows\CurrentVersion\Uninstall",
              r"SOFTWARE\WOW6432Node\Microsoft\Windows\CurrentVersion\Uninstall")


def vigembus() -> InstalledDriver | None:
    """The installed ViGEmBus driver (name and version), or None when it is not installed."""
    reg = registry()
    for path in _UNINSTALL:
        try:
            root = reg.OpenKey(reg.HKEY_LOCAL_MACHINE, path)
        except OSError:
            continue
        with root:
            i = 0
            while True:
                try:
                    sub = reg.EnumKey(root, i)
                except OSError:
                    break
                i += 1
                found = _vigem_entry(reg, root, sub)
                if found is not None:
                    return found
    try:  # the driver service without an Apps entry (installed by hand)
        reg.OpenKey(reg.HKEY_LOCAL_MACHINE, r"SYSTEM\CurrentControlSet\Services\ViGEmBus").Close()
        return InstalledDriver("ViGEmBus (service only)", "unknown")
    except OSError:
        return None


def _vigem_entry(reg: Any, root: Any, sub: str) -> InstalledDriver | None:
    try:
        with reg.OpenKey(root, sub) as key:
            name = str(reg.QueryValueEx(key, "DisplayName")[0])
            if "virtual gamepad emulation bus" not in name.lower() and "vigem bus" not in name.lower():
                return None
            try:
                version = str(reg.QueryValueEx(key, "DisplayVersion")[0])
            except OSError:
                version = "unknown"
            return InstalledDriver(name, version)
    except OSError:
        return None


def vigembus_installer() -> Path | None:
    """The ViGEmBus installer that ships inside the installed vgamepad (found without importing it)."""
    spec = importlib.util.find_spec("vgamepad")
    if spec is None or spec.origin is None:
        return None
    arch = "x64" if sys.maxsize > 2**32 else "x86"
    path = Path(spec.origin).parent / "win" / "vigem" / "install" / arch / f"ViGEmBusSetup_{arch}.msi"
    return path if path.is_file() else None


def vigem_hint(error: BaseException) -> str:
    """What to do about an error from vgamepad on Windows (its errors name a VIGEM_ERROR code)."""
    text = str(error)
    installer = vigembus_installer()
    install = (f"install ViGEmBus ({installer} or {VIGEMBUS_URL}) and reboot" if installer is not None
               else f"install ViGEmBus from {VIGEMBUS_URL} and reboot")
    if "BUS_NOT_FOUND" in text:
        return f"the ViGEmBus driver is not installed: {install}"
    if "BUS_VERSION_MISMATCH" in text:
        return f"the installed ViGEmBus is too old for vgamepad: uninstall it, {install}"
    if "NO_FREE_SLOT" in text:
        return "all four XInput slots are taken: unplug a pad or close other pad tools (DS4Windows, Steam Input)"
    if "BUS_ACCESS_FAILED" in text or "could not connect" in text:
        return f"ViGEmBus did not answer: reboot; if it persists, {install}"
    return f"{install}, or run with --dry-run to send nothing"


class XINPUT_GAMEPAD(ctypes.Structure):
    _fields_ = [("wButtons", ctypes.c_uint16), ("bLeftTrigger", ctypes.c_uint8), ("bRightTrigger", ctypes.c_uint8),
                ("sThumbLX", ctypes.c_int16), ("sThumbLY", ctypes.c_int16),
                ("sThumbRX", ctypes.c_int16), ("sThumbRY", ctypes.c_int16)]


class XINPUT_STATE(ctypes.Structure):
    _fields_ = [("dwPacketNumber", ctypes.c_uint32), ("Gamepad", XINPUT_GAMEPAD)]


def xinput_pads() -> dict[int, tuple[int, int, int, int]]:
    """The XInput pads games see now: slot → (left x, left y, right x, right y), raw int16 stick values."""
    dll = windll()
    try:
        xinput = dll.xinput1_4  # Windows 8 and later
    except (AttributeError, OSError):
        xinput = dll.xinput9_1_0
    pads = {}
    for slot in range(XUSER_MAX_COUNT):
        state = XINPUT_STATE()
        if xinput.XInputGetState(slot, ctypes.byref(state)) == 0:  # ERROR_SUCCESS; 1167: not connected
            g = state.Gamepad
            pads[slot] = (g.sThumbLX, g.sThumbLY, g.sThumbRX, g.sThumbRY)
    return pads
