"""A fake Windows desktop for tests: monitors with display scaling, windows, and the
Windows-only modules explorer calls, with the real packages' call signatures.

:class:`FakeDesktop` holds the truth in physical pixels: monitors (position,
size, scaling), windows (handle, title, client area), the picture on screen,
the foreground window, the process's DPI awareness, ViGEmBus and the XInput
slots. :meth:`FakeDesktop.install` puts its fakes in place of
``ctypes.windll`` (user32, shcore, xinput1_4), ``winreg``, ``pywinctl``,
``mss``, ``dxcam`` and ``vgamepad`` for the duration of a test. Like Windows,
it reports window rectangles in logical (scaled) pixels to a process that is
not per-monitor DPI-aware, while screen grabs are physical: code that asks for
geometry before making itself DPI-aware captures the wrong place.

Production code never imports this module.
"""

from __future__ import annotations

import ctypes
import enum
import importlib.machinery
import sys
import types
from collections import namedtuple
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Rect = namedtuple("Rect", "left top right bottom")  # pywinctl's Rect


@dataclass
class FakeMonitor:
    """A monitor: desktop position and size in physical pixels, and its scaling (1.5 = 150 %)."""

    left: int
    top: int
    width: int
    height: int
    scale: float = 1.0

    def contains(self, x: int, y: int) -> bool:
        return self.left <= x < self.left + self.width and self.top <= y < self.top + self.height


@dataclass
class FakeWindow:
    """A top-level window: its client area in physical pixels."""

    hwnd: int
    title: str
    left: int
    top: int
    width: int
    height: int
    visible: bool = True
    minimised: bool = False
    alive: bool = True
    directx: bool = False  # drawn with DirectX: GDI grabs (mss) see it black


@dataclass
class FakeDesktop:
    """The whole fake Windows machine (see the module docstring)."""

    monitors: list[FakeMonitor]
    windows: list[FakeWindow] = field(default_factory=list)
    foreground: int = 0
    awareness: int = 0  # 0 unaware, 1 system, 2 per-monitor (what a process starts with, or what was set before)
    vigembus: tuple[str, str] | None = ("Nefarius Virtual Gamepad Emulation Bus Driver", "1.17.333.0")
    vigem_error: str = ""  # e.g. "VIGEM_ERROR_BUS_NOT_FOUND": creating a pad fails with it
    seed: int = 0

    def __post_init__(self) -> None:
        self.events: list[tuple[str, int]] = []  # (geometry call, the awareness it was made under)
        self.version = 0  # bumped by every change of the picture
        self.lost = False  # Desktop Duplication outputs lost (a mode change in progress)
        self.xinput: dict[int, list[int]] = {}  # slot → [lx, ly, rx, ry]
        self.xinput_buttons: dict[int, list[int]] = {}  # slot → [wButtons, left trigger, right trigger]
        self.cameras: list[FakeDXCamera] = []
        self.paint()

    # ---------------------------------------------------------------- geometry
    @property
    def bounds(self) -> tuple[int, int, int, int]:
        """Left, top, right, bottom of all monitors together."""
        return (min(m.left for m in self.monitors), min(m.top for m in self.monitors),
                max(m.left + m.width for m in self.monitors), max(m.top + m.height for m in self.monitors))

    def paint(self) -> None:
        """A new random picture over the whole desktop."""
        left, top, right, bottom = self.bounds
        rng = np.random.default_rng(self.seed + self.version)
        self.image = rng.integers(0, 256, (bottom - top, right - left, 3), dtype=np.uint8)
        self.version += 1

    def pixels(self, left: int, top: int, width: int, height: int) -> np.ndarray:
        """The true picture of a desktop rectangle, ``uint8[h, w, 3]`` RGB; black off the monitors."""
        x0, y0 = self.bounds[:2]
        out = np.zeros((height, width, 3), np.uint8)
        for m in self.monitors:
            x1, y1 = max(left, m.left), max(top, m.top)
            x2, y2 = min(left + width, m.left + m.width), min(top + height, m.top + m.height)
            if x2 > x1 and y2 > y1:
                out[y1 - top:y2 - top, x1 - left:x2 - left] = self.image[y1 - y0:y2 - y0, x1 - x0:x2 - x0]
        return out

    def monitor_at(self, x: int, y: int) -> FakeMonitor:
        return next((m for m in self.monitors if m.contains(x, y)), self.monitors[0])

    def reported(self, x: int, y: int) -> tuple[int, int]:
        """A physical point as a process with the current awareness is told it (Windows' DPI virtualisation)."""
        if self.awareness == 2:
            return x, y
        m = self.monitor_at(x, y)
        factor = 1.0 / m.scale if self.awareness == 0 else self.monitors[0].scale / m.scale
        return round(m.left + (x - m.left) * factor), round(m.top + (y - m.top) * factor)

    def window(self, hwnd: int) -> FakeWindow:
        return next(w for w in self.windows if w.hwnd == hwnd)

    def close_window(self, hwnd: int) -> None:
        w = self.window(hwnd)
        w.alive = w.visible = False

    def set_resolution(self, index: int, width: int, height: int) -> None:
        """Change a monitor's resolution: open duplications see it on their next grab."""
        self.monitors[index].width, self.monitors[index].height = width, height
        for camera in self.cameras:
            camera.mode_changed = True
        self.paint()

    # ---------------------------------------------------------------- install
    def install(self, monkeypatch: Any, dxcam: bool = True) -> FakeDesktop:
        """Make explorer see this desktop: Windows, its DLLs, winreg and the Windows-only packages."""
        from explorer.envs.live import winapi
        monkeypatch.setattr(winapi, "is_windows", lambda: True)
        self.windll = FakeWindll(self)
        monkeypatch.setattr(winapi, "windll", lambda: self.windll)
        monkeypatch.setattr(winapi, "registry", lambda: FakeWinreg(self))
        monkeypatch.setattr(winapi, "_state", {})
        monkeypatch.setitem(sys.modules, "pywinctl", fake_pywinctl(self))
        monkeypatch.setitem(sys.modules, "mss", fake_mss(self))
        monkeypatch.setitem(sys.modules, "vgamepad", fake_vgamepad(self))
        if dxcam:
            monkeypatch.setitem(sys.modules, "dxcam", fake_dxcam(self))
        else:
            monkeypatch.setitem(sys.modules, "dxcam", None)  # not installed: import fails, find_spec finds nothing
        return self


def _module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    return module


# ---------------------------------------------------------------- ctypes.windll

class _User32:
    def __init__(self, desktop: FakeDesktop):
        self.d = desktop

    def SetProcessDpiAwarenessContext(self, context: Any) -> int:
        value = getattr(context, "value", context)
        if self.d.awareness != 0:  # a process's awareness is set once
            return 0
        if value == ctypes.c_void_p(-4).value:
            self.d.awareness = 2
            return 1
        return 0

    def GetThreadDpiAwarenessContext(self) -> int:
        return 0x10 + self.d.awareness

    def GetAwarenessFromDpiAwarenessContext(self, context: Any) -> int:
        return int(getattr(context, "value", context)) - 0x10

    def SetProcessDPIAware(self) -> int:
        if self.d.awareness == 0:
            self.d.awareness = 1
        return 1

    def GetForegroundWindow(self) -> int:
        return self.d.foreground

    def MonitorFromPoint(self, point: Any, flags: int) -> int:
        m = self.d.monitor_at(point.x, point.y)
        return self.d.monitors.index(m) + 1


class _Shcore:
    def __init__(self, desktop: FakeDesktop):
        self.d = desktop

    def SetProcessDpiAwareness(self, value: int) -> int:
        if self.d.awareness != 0:
            return -2147024891  # E_ACCESSDENIED
        self.d.awareness = value
        return 0

    def GetDpiForMonitor(self, monitor: Any, kind: int, dpi_x: Any, dpi_y: Any) -> int:
        m = self.d.monitors[int(getattr(monitor, "value", monitor)) - 1]
        dpi_x._obj.value = dpi_y._obj.value = round(96 * m.scale)
        return 0


class _XInput:
    def __init__(self, desktop: FakeDesktop):
        self.d = desktop

    def XInputGetState(self, slot: int, state: Any) -> int:
        if slot not in self.d.xinput:
            return 1167  # ERROR_DEVICE_NOT_CONNECTED
        g = state._obj.Gamepad
        g.sThumbLX, g.sThumbLY, g.sThumbRX, g.sThumbRY = self.d.xinput[slot]
        return 0


class _Function:
    """A DLL function as ctypes gives it: callable, with settable ``argtypes`` and ``restype``."""

    def __init__(self, fn: Any):
        self.fn, self.argtypes, self.restype = fn, None, None

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


class _Dll:
    """A loaded DLL: its functions by name; a missing one raises AttributeError, as with ctypes."""

    def __init__(self, impl: Any):
        self._impl = impl
        self._functions: dict[str, _Function] = {}
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> _Function:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._functions:
            fn = getattr(self._impl, name)  # AttributeError when absent

            def call(*args: Any, _name: str = name, _fn: Any = fn) -> Any:
                self.calls.append((_name, args))
                return _fn(*args)

            self._functions[name] = _Function(call)
        return self._functions[name]


class FakeWindll:
    """``ctypes.windll`` with user32, shcore and xinput1_4 (each keeps its ``calls``)."""

    def __init__(self, desktop: FakeDesktop):
        self.user32 = _Dll(_User32(desktop))
        self.shcore = _Dll(_Shcore(desktop))
        self.xinput1_4 = _Dll(_XInput(desktop))


# ---------------------------------------------------------------- winreg

class _Key:
    def __init__(self, path: str, values: dict[str, str] | None = None, subkeys: list[str] | None = None):
        self.path, self.values, self.subkeys = path, values or {}, subkeys or []

    def __enter__(self) -> _Key:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def Close(self) -> None:
        pass


class FakeWinreg:
    """``winreg``: the uninstall entries (ViGEmBus among some others) and the ViGEmBus service."""

    HKEY_LOCAL_MACHINE = "HKLM"
    _UNINSTALL = r"SOFTWARE\Microsoft\Windows\CurrentVersion\Uninstall"

    def __init__(self, desktop: FakeDesktop):
        self.entries = {"{0001}": {"DisplayName": "Some Game", "DisplayVersion": "1.0"}}
        if desktop.vigembus is not None:
            self.entries["{0002}"] = {"DisplayName": desktop.vigembus[0], "DisplayVersion": desktop.vigembus[1]}
        self.service = desktop.vigembus is not None

    def OpenKey(self, key: Any, sub_key: str) -> _Key:
        if key == self.HKEY_LOCAL_MACHINE and sub_key == self._UNINSTALL:
            return _Key(sub_key, subkeys=list(self.entries))
        if isinstance(key, _Key) and sub_key in self.entries:
            return _Key(sub_key, values=self.entries[sub_key])
        if key == self.HKEY_LOCAL_MACHINE and sub_key.endswith(r"Services\ViGEmBus") and self.service:
            return _Key(sub_key)
        raise FileNotFoundError(2, "The system cannot find the file specified")

    def EnumKey(self, key: _Key, index: int) -> str:
        if index >= len(key.subkeys):
            raise OSError(259, "No more data is available")
        return key.subkeys[index]

    def QueryValueEx(self, key: _Key, name: str) -> tuple[str, int]:
        if name not in key.values:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        return key.values[name], 1  # REG_SZ


# ---------------------------------------------------------------- pywinctl

class FakePywinctlWindow:
    """``pywinctl.Window`` on Windows: live title, state, handle and client frame."""

    def __init__(self, desktop: FakeDesktop, hwnd: int):
        self.d, self._hWnd = desktop, hwnd

    @property
    def _w(self) -> FakeWindow:
        return self.d.window(self._hWnd)

    @property
    def title(self) -> str:
        return self._w.title if self._w.alive else ""

    @property
    def isVisible(self) -> bool:
        return self._w.visible

    @property
    def isMinimized(self) -> bool:
        return self._w.minimised

    @property
    def isAlive(self) -> bool:
        return self._w.alive

    def getHandle(self) -> int:
        return self._hWnd

    def getClientFrame(self) -> Rect:
        w = self._w
        self.d.events.append(("getClientFrame", self.d.awareness))
        left, top = self.d.reported(w.left, w.top)
        right, bottom = self.d.reported(w.left + w.width - 1, w.top + w.height - 1)
        return Rect(left, top, right + 1, bottom + 1)


def fake_pywinctl(desktop: FakeDesktop) -> types.ModuleType:
    module = _module("pywinctl")

    def _imported() -> None:
        if desktop.awareness == 0:  # what importing the real pywinctl (pymonctl, pywinbox) does
            desktop.awareness = 1

    def getAllWindows() -> list[FakePywinctlWindow]:
        _imported()
        return [FakePywinctlWindow(desktop, w.hwnd) for w in desktop.windows if w.alive]

    def getActiveWindow() -> FakePywinctlWindow | None:
        _imported()
        return FakePywinctlWindow(desktop, desktop.foreground) if desktop.foreground else None

    def getActiveWindowTitle() -> str:
        w = getActiveWindow()
        return w.title if w is not None else ""

    module.getAllWindows = getAllWindows  # type: ignore[attr-defined]
    module.getActiveWindow = getActiveWindow  # type: ignore[attr-defined]
    module.getActiveWindowTitle = getActiveWindowTitle  # type: ignore[attr-defined]
    return module


# ---------------------------------------------------------------- mss (GDI on Windows)

class _Shot:
    def __init__(self, rgb: np.ndarray):
        self.height, self.width = rgb.shape[:2]
        bgra = np.concatenate([rgb[..., ::-1], np.full((*rgb.shape[:2], 1), 255, np.uint8)], axis=-1)
        self.bgra = bgra.tobytes()


def fake_mss(desktop: FakeDesktop) -> types.ModuleType:
    module = _module("mss")

    class MSS:
        """``mss.MSS``: monitors (0 = all together) and grabs; DirectX windows grab black, as with GDI."""

        def __init__(self) -> None:
            self.closed = False

        @property
        def monitors(self) -> list[dict[str, int]]:
            left, top, right, bottom = desktop.bounds
            every = {"left": left, "top": top, "width": right - left, "height": bottom - top}
            return [every] + [{"left": m.left, "top": m.top, "width": m.width, "height": m.height}
                              for m in desktop.monitors]

        def grab(self, monitor: dict[str, int]) -> _Shot:
            rgb = desktop.pixels(monitor["left"], monitor["top"], monitor["width"], monitor["height"])
            for w in desktop.windows:
                if w.directx and w.visible:
                    x1 = max(w.left, monitor["left"]) - monitor["left"]
                    y1 = max(w.top, monitor["top"]) - monitor["top"]
                    x2 = min(w.left + w.width, monitor["left"] + monitor["width"]) - monitor["left"]
                    y2 = min(w.top + w.height, monitor["top"] + monitor["height"]) - monitor["top"]
                    if x2 > x1 and y2 > y1:
                        rgb[y1:y2, x1:x2] = 0
            return _Shot(rgb)

        def close(self) -> None:
            self.closed = True

    module.MSS = MSS  # type: ignore[attr-defined]
    return module


# ---------------------------------------------------------------- dxcam

class FakeCOMError(Exception):
    """What comtypes raises for a failed DXGI call."""


class _Desc:
    def __init__(self, m: FakeMonitor):
        self.DesktopCoordinates = types.SimpleNamespace(left=m.left, top=m.top, right=m.left + m.width,
                                                        bottom=m.top + m.height)


class _FakeOutput:
    def __init__(self, desktop: FakeDesktop, index: int):
        self.d, self.i = desktop, index
        self.desc = _Desc(desktop.monitors[index])

    @property
    def devicename(self) -> str:
        return f"\\\\.\\DISPLAY{self.i + 1}"

    def update_desc(self) -> None:
        self.desc = _Desc(self.d.monitors[self.i])


class FakeDXCamera:
    """``dxcam.DXCamera`` 0.3: ``grab(region=None, copy=True, new_frame_only=True)`` gives BGRA only when the
    output changed since the last grab, else None; regions are output-local ``(left, top, right, bottom)``."""

    def __init__(self, desktop: FakeDesktop, output: int, region: Any, output_color: str):
        self.d, self.output = desktop, output
        m = desktop.monitors[output]
        self.width, self.height = m.width, m.height
        self.region = region if region is not None else (0, 0, self.width, self.height)
        self.output_color = output_color
        self.is_released = False
        self.is_capturing = False
        self.mode_changed = False
        self.seen = -1
        self.grabs = 0

    def _validate_region(self, region: Any) -> None:
        left, top, right, bottom = region
        if not (self.width >= right > left >= 0 and self.height >= bottom > top >= 0):
            raise ValueError(f"Invalid Region: Region should be in {self.width}x{self.height}")

    def _frame(self, region: Any) -> np.ndarray:
        if self.output_color != "BGRA" and "cv2" not in sys.modules:
            raise ModuleNotFoundError("No module named 'cv2'")  # dxcam 0.3 converts colours with OpenCV
        m = self.d.monitors[self.output]
        left, top, right, bottom = region
        rgb = self.d.pixels(m.left + left, m.top + top, right - left, bottom - top)
        return np.concatenate([rgb[..., ::-1], np.full((*rgb.shape[:2], 1), 255, np.uint8)], axis=-1)

    def grab(self, region: Any = None, copy: bool = True, new_frame_only: bool = True) -> np.ndarray | None:
        if self.is_released:
            raise RuntimeError("DXCamera has been released and cannot be reused. "
                               "Create a new camera instance with dxcam.create().")
        self.grabs += 1
        if self.d.lost:
            raise FakeCOMError(-2005270490, "DXGI_ERROR_ACCESS_LOST")
        if self.mode_changed:  # dxcam recovers the output itself and reports no frame this time
            self.mode_changed = False
            m = self.d.monitors[self.output]
            self.width, self.height = m.width, m.height
            return None
        region = self.region if region is None else region
        self._validate_region(region)
        if self.seen == self.d.version:
            return None
        self.seen = self.d.version
        return self._frame(region)

    def start(self, region: Any = None, target_fps: int = 60, video_mode: bool = False, delay: int = 0) -> None:
        if self.is_capturing:
            raise RuntimeError("Capture is already running. Call stop() first.")
        region = self.region if region is None else region
        self._validate_region(region)
        self.region, self.is_capturing = region, True

    def get_latest_frame(self, copy: bool = True, with_timestamp: bool = False) -> Any:
        if not self.is_capturing:
            return None
        frame = self._frame(self.region)
        return (frame, 0.0) if with_timestamp else frame

    def stop(self) -> None:
        self.is_capturing = False

    def release(self) -> None:
        if not self.is_released:
            self.is_released = True
            self.stop()


class _Factory:
    def __init__(self, desktop: FakeDesktop):
        self.outputs = [[_FakeOutput(desktop, i) for i in range(len(desktop.monitors))]]


def fake_dxcam(desktop: FakeDesktop, with_factory: bool = True) -> types.ModuleType:
    """The ``dxcam`` module: one adapter whose outputs are the monitors, in the fake's order."""
    module = _module("dxcam")
    instances: dict[tuple[int, int], FakeDXCamera] = {}
    module.created = []  # type: ignore[attr-defined]

    def create(device_idx: int = 0, output_idx: int | None = None, region: Any = None, output_color: str = "RGB",
               max_buffer_len: int = 8, backend: str = "dxgi", processor_backend: str = "cv2") -> FakeDXCamera:
        if desktop.lost:
            raise FakeCOMError(-2005270494, "DXGI_ERROR_NOT_CURRENTLY_AVAILABLE")
        output = 0 if output_idx is None else output_idx
        existing = instances.get((device_idx, output))
        if existing is not None and not existing.is_released:
            return existing  # dxcam keeps one camera per output, with the parameters it was made with
        camera = FakeDXCamera(desktop, output, region, output_color)
        instances[(device_idx, output)] = camera
        desktop.cameras.append(camera)
        module.created.append(camera)
        return camera

    def output_info() -> str:
        return "".join(f"Device[0] Output[{i}]: Res:({m.width}, {m.height}) Rot:0 Primary:{m.left == m.top == 0}\n"
                       for i, m in enumerate(desktop.monitors))

    module.create = create  # type: ignore[attr-defined]
    module.output_info = output_info  # type: ignore[attr-defined]
    module.device_info = lambda: "Device[0]:<Device Name:Fake GPU>\n"  # type: ignore[attr-defined]
    if with_factory:
        setattr(module, "__factory", _Factory(desktop))  # noqa: B010 (the name dxcam's module uses)
    return module


# ---------------------------------------------------------------- vgamepad (Windows)

def fake_vgamepad(desktop: FakeDesktop) -> types.ModuleType:
    """``vgamepad`` on Windows: each ``VX360Gamepad`` takes the first free XInput slot until deleted."""
    module = _module("vgamepad")
    module.__version__ = "0.2.0"  # type: ignore[attr-defined]

    # vgamepad's XUSB_BUTTON, with the values of the real enum (XInput's wButtons bits)
    XUSB_BUTTON = enum.IntFlag("XUSB_BUTTON", {
        "XUSB_GAMEPAD_DPAD_UP": 0x1, "XUSB_GAMEPAD_DPAD_DOWN": 0x2, "XUSB_GAMEPAD_DPAD_LEFT": 0x4,
        "XUSB_GAMEPAD_DPAD_RIGHT": 0x8, "XUSB_GAMEPAD_START": 0x10, "XUSB_GAMEPAD_BACK": 0x20,
        "XUSB_GAMEPAD_LEFT_THUMB": 0x40, "XUSB_GAMEPAD_RIGHT_THUMB": 0x80, "XUSB_GAMEPAD_LEFT_SHOULDER": 0x100,
        "XUSB_GAMEPAD_RIGHT_SHOULDER": 0x200, "XUSB_GAMEPAD_GUIDE": 0x400, "XUSB_GAMEPAD_A": 0x1000,
        "XUSB_GAMEPAD_B": 0x2000, "XUSB_GAMEPAD_X": 0x4000, "XUSB_GAMEPAD_Y": 0x8000})

    class VX360Gamepad:
        def __init__(self) -> None:
            if desktop.vigem_error:
                raise RuntimeError(f"Error: {desktop.vigem_error}")
            self.slot = next(i for i in range(4) if i not in desktop.xinput)
            desktop.xinput[self.slot] = [0, 0, 0, 0]
            desktop.xinput_buttons[self.slot] = [0, 0, 0]
            self._report = [0, 0, 0, 0]
            self._buttons = [0, 0, 0]  # wButtons, left trigger, right trigger

        def press_button(self, button: int) -> None:
            self._buttons[0] |= int(button)

        def release_button(self, button: int) -> None:
            self._buttons[0] &= ~int(button)

        def left_trigger_float(self, value_float: float) -> None:
            self._buttons[1] = round(value_float * 255)

        def right_trigger_float(self, value_float: float) -> None:
            self._buttons[2] = round(value_float * 255)

        def left_joystick_float(self, x_value_float: float, y_value_float: float) -> None:
            self._report[0:2] = [round(x_value_float * 32767), round(y_value_float * 32767)]

        def right_joystick_float(self, x_value_float: float, y_value_float: float) -> None:
            self._report[2:4] = [round(x_value_float * 32767), round(y_value_float * 32767)]

        def reset(self) -> None:
            self._report = [0, 0, 0, 0]
            self._buttons = [0, 0, 0]

        def update(self) -> None:
            desktop.xinput[self.slot] = list(self._report)
            desktop.xinput_buttons[self.slot] = list(self._buttons)

        def __del__(self) -> None:
            desktop.xinput.pop(getattr(self, "slot", -1), None)
            desktop.xinput_buttons.pop(getattr(self, "slot", -1), None)

    module.VX360Gamepad = VX360Gamepad  # type: ignore[attr-defined]
    module.XUSB_BUTTON = XUSB_BUTTON  # type: ignore[attr-defined]
    return module
