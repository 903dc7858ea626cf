"""explorer.envs.live.winapi against fakes of user32, shcore, xinput1_4 and winreg with the real call signatures."""

from __future__ import annotations

import ctypes
import sys
import types

from explorer.envs.live import winapi
from explorer.testing.fakes_windows import FakeDesktop, FakeMonitor, FakeWinreg


def test_dpi_awareness_is_set_per_monitor_v2_once(monkeypatch):
    desk = FakeDesktop([FakeMonitor(0, 0, 1920, 1080, 1.5)]).install(monkeypatch)
    assert winapi.make_dpi_aware() == "per-monitor"
    calls = [(name, args) for name, args in desk.windll.user32.calls if name.startswith("SetProcess")]
    assert len(calls) == 1 and calls[0][0] == "SetProcessDpiAwarenessContext"
    assert calls[0][1][0].value == ctypes.c_void_p(-4).value  # DPI_AWARENESS_CONTEXT_PER_MONITOR_AWARE_V2
    assert desk.windll.shcore.calls == []
    n = len(desk.windll.user32.calls)
    assert winapi.make_dpi_aware() == "per-monitor" and len(desk.windll.user32.calls) == n  # once per process


def test_dpi_awareness_on_windows_8_1_goes_through_shcore(monkeypatch):
    desk = FakeDesktop([FakeMonitor(0, 0, 1920, 1080, 1.25)]).install(monkeypatch)
    full = desk.windll.user32._impl
    desk.windll.user32._impl = types.SimpleNamespace(SetProcessDPIAware=full.SetProcessDPIAware)  # no *Context calls
    assert winapi.make_dpi_aware() == "unknown"  # 8.1 cannot tell
    assert desk.windll.shcore.calls == [("SetProcessDpiAwareness", (2,))] and desk.awareness == 2
    assert not any(name == "SetProcessDPIAware" for name, _ in desk.windll.user32.calls)


def test_monitor_scale_and_foreground_window(monkeypatch):
    desk = FakeDesktop([FakeMonitor(0, 0, 2560, 1440, 1.5), FakeMonitor(-1920, -300, 1920, 1080, 1.0)],
                       foreground=42).install(monkeypatch)
    assert winapi.monitor_scale(100, 100) == 1.5
    assert winapi.monitor_scale(-100, -100) == 1.0
    assert winapi.foreground_window() == 42
    desk.foreground = 0
    assert winapi.foreground_window() == 0


def test_vigembus_from_the_registry(monkeypatch):
    desk = FakeDesktop([FakeMonitor(0, 0, 800, 600)], vigembus=("ViGEm Bus Driver", "1.21.442.0")).install(monkeypatch)
    driver = winapi.vigembus()
    assert driver == winapi.InstalledDriver("ViGEm Bus Driver", "1.21.442.0") and driver.version_tuple == (1, 21, 442, 0)
    reg = FakeWinreg(desk)
    reg.entries.clear()  # the driver service is there, its Apps entry is not
    monkeypatch.setattr(winapi, "registry", lambda: reg)
    assert winapi.vigembus() == winapi.InstalledDriver("ViGEmBus (service only)", "unknown")
    reg.service = False
    assert winapi.vigembus() is None


def test_xinput_pads(monkeypatch):
    desk = FakeDesktop([FakeMonitor(0, 0, 800, 600)]).install(monkeypatch)
    assert winapi.xinput_pads() == {}
    desk.xinput[2] = [100, -200, 300, -32767]
    assert winapi.xinput_pads() == {2: (100, -200, 300, -32767)}


def test_the_vigembus_installer_inside_vgamepad_is_named(monkeypatch, tmp_path):
    arch = "x64" if sys.maxsize > 2**32 else "x86"
    msi = tmp_path / "vgamepad" / "win" / "vigem" / "install" / arch / f"ViGEmBusSetup_{arch}.msi"
    msi.parent.mkdir(parents=True)
    msi.write_bytes(b"msi")
    (tmp_path / "vgamepad" / "__init__.py").write_text("")
    monkeypatch.delitem(sys.modules, "vgamepad", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert winapi.vigembus_installer() == msi
    hint = winapi.vigem_hint(RuntimeError("Error: VIGEM_ERROR_BUS_NOT_FOUND"))
    assert hint == f"the ViGEmBus driver is not installed: install ViGEmBus ({msi} or {winapi.VIGEMBUS_URL}) and reboot"
