"""`explorer doctor` for Windows users, on the fake desktop (ViGEmBus, the pad seen through XInput,
the window and its grab, focus, display scaling), and `explorer doctor --report` for real here."""

from __future__ import annotations

import sys

import pytest

from explorer import cli
from explorer.config import load
from explorer.run import doctor
from explorer.testing.fakes_windows import FakeDesktop, FakeMonitor, FakeWindow

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

GAME = "Doom Eternal Test"


def _desktop(monkeypatch, monitors=None, directx=False, **kw) -> FakeDesktop:
    monitors = monitors or [FakeMonitor(0, 0, 2560, 1440, 1.5), FakeMonitor(-1920, 0, 1920, 1080, 1.0)]
    windows = [FakeWindow(1, "Windows Terminal", 0, 0, 900, 600),
               FakeWindow(2, GAME, 400, 200, 1280, 720, directx=directx)]
    return FakeDesktop(monitors, windows, foreground=1, **kw).install(monkeypatch)


def _window_config(*extra: str):
    return load(None, ["capture.source=window", f"capture.window_title={GAME!r}", *extra])


def test_vigembus_version_is_reported(monkeypatch):
    _desktop(monkeypatch)
    assert doctor._check("vigembus", doctor.check_vigembus) == doctor.Check(
        "vigembus", "ok", "Nefarius Virtual Gamepad Emulation Bus Driver 1.17.333.0")


@pytest.mark.parametrize("driver, expected", [
    (None, "ViGEmBus is not installed: install it (https://github.com/nefarius/ViGEmBus/releases) and reboot"),
    (("ViGEm Bus Driver", "1.16.116.0"), "ViGEm Bus Driver 1.16.116.0 is older than vgamepad needs (1.17.333 or later)"),
])
def test_a_missing_or_old_vigembus_fails_with_what_to_do(monkeypatch, driver, expected):
    _desktop(monkeypatch, vigembus=driver)
    monkeypatch.setattr("explorer.envs.live.winapi.vigembus_installer", lambda: None)
    check = doctor._check("vigembus", doctor.check_vigembus)
    assert check.status == "FAIL" and check.detail.startswith(expected)


def test_the_pad_is_plugged_in_seen_by_xinput_and_unplugged(monkeypatch):
    desk = _desktop(monkeypatch)
    desk.xinput[0] = [0, 0, 0, 0]  # a real pad already holds player 1
    check = doctor._check("pad driver", lambda: doctor.check_pad(load()))
    assert check == doctor.Check("pad driver", "ok", "plugged in as XInput player 2, a stick value reached XInput, "
                                                     "centred and unplugged")
    assert desk.xinput == {0: [0, 0, 0, 0]}  # ours is gone again


@pytest.mark.parametrize("error, hint", [
    ("VIGEM_ERROR_BUS_NOT_FOUND", "the ViGEmBus driver is not installed: install ViGEmBus"),
    ("VIGEM_ERROR_BUS_VERSION_MISMATCH", "the installed ViGEmBus is too old for vgamepad"),
    ("VIGEM_ERROR_NO_FREE_SLOT", "all four XInput slots are taken"),
])
def test_a_pad_that_cannot_be_created_says_why(monkeypatch, error, hint):
    desk = _desktop(monkeypatch, vigem_error=error)
    check = doctor._check("pad driver", lambda: doctor.check_pad(load()))
    assert check.status == "FAIL" and f"RuntimeError: Error: {error}): {hint}" in check.detail
    assert desk.xinput == {}


def test_a_black_grab_of_the_game_window_fails_with_the_fix(monkeypatch):
    _desktop(monkeypatch, directx=True)
    check = doctor._check("capture", lambda: doctor.check_capture(_window_config("capture.backend='mss'")))
    assert check.status == "FAIL"
    assert check.detail.startswith(f"mss (capture.backend = \"mss\"), region {{'left': 400, 'top': 200, 'width': 1280, "
                                   f"'height': 720}}, the client area of window '{GAME}': the grab is uniform (value 0)")
    assert "run the game in borderless windowed mode, or set capture.backend = \"dxcam\"" in check.detail
    ok = doctor._check("capture", lambda: doctor.check_capture(_window_config()))
    assert ok.status == "ok" and ok.detail.startswith("dxcam (auto: Windows with dxcam installed), region {'left': 400")
    assert ok.detail.endswith("grabbed 1280x720, not uniform")


def test_focus_of_the_game_window(monkeypatch):
    desk = _desktop(monkeypatch)
    check = doctor._check("window focus", lambda: doctor.check_focus(_window_config()))
    assert check.status == "warn" and "not in front now" in check.detail and "control.pause_unfocused" in check.detail
    desk.foreground = 2
    assert doctor._check("window focus", lambda: doctor.check_focus(_window_config())).status == "ok"
    assert doctor._check("window focus", lambda: doctor.check_focus(load())).status == "n/a"


def test_scaling_is_reported_per_monitor(monkeypatch):
    _desktop(monkeypatch)
    assert doctor._check("dpi scaling", doctor.check_scaling) == doctor.Check(
        "dpi scaling", "ok", "DPI awareness per-monitor; monitors 1: 2560x1440 at 0,0 (150%); "
                             "2: 1920x1080 at -1920,0 (100%)")


def test_scaling_fails_when_awareness_was_set_to_system_before_explorer(monkeypatch):
    _desktop(monkeypatch, awareness=1)
    check = doctor._check("dpi scaling", doctor.check_scaling)
    assert check.status == "FAIL" and check.detail.startswith("DPI awareness system;")
    assert "scaled differently from the primary will be off" in check.detail
    _desktop(monkeypatch, monitors=[FakeMonitor(0, 0, 1920, 1080, 1.25)], awareness=1)
    assert doctor._check("dpi scaling", doctor.check_scaling).status == "warn"


def test_doctor_report_on_windows(monkeypatch, tmp_path, capsys):
    desk = _desktop(monkeypatch)
    desk.foreground = 2
    monkeypatch.setattr(doctor, "check_tensorflow", lambda: "tensorflow (not run here)")
    monkeypatch.setattr(doctor, "check_game", lambda config: "vizdoom (not run here)")
    monkeypatch.setattr(doctor, "check_hotkeys", lambda config: "pynput (not run here)")
    rc = doctor.run_doctor(_window_config(), report=tmp_path / "report.md")
    out = capsys.readouterr().out
    status = {line.split()[1]: line.split()[0] for line in out.splitlines()[:9]}
    assert status == {"tensorflow": "ok", "built-in": "ok", "display": "ok", "dpi": "ok", "capture": "ok",
                      "window": "ok", "vigembus": "ok", "pad": "ok", "hotkeys": "ok"}
    assert rc == 0 and "all checks passed" in out
    text = (tmp_path / "report.md").read_text()
    assert "ok       vigembus            Nefarius Virtual Gamepad Emulation Bus Driver 1.17.333.0" in text
    assert "- 2: 1920x1080 at -1920,0" in text
    settings = tomllib.loads(text.split("```toml\n")[1].split("```")[0])
    assert settings["capture"]["window_title"] == GAME and set(settings) == {"capture", "pad", "control"}


def test_doctor_report_here(tmp_path, monkeypatch, capsys):
    """`explorer doctor --report FILE` on this Linux machine, without a display: what applies is
    checked, the Windows checks say n/a, and the file holds it all with versions."""
    from importlib import metadata
    monkeypatch.delenv("DISPLAY", raising=False)
    path = tmp_path / "sub" / "doctor.md"
    rc = cli.main(["doctor", "--report", str(path)])
    out = capsys.readouterr().out
    assert rc == 1 and f"report written to {path}" in out
    text = path.read_text()
    lines = {line.split()[1]: line.split()[0] for line in text.split("```\n")[1].splitlines()}
    assert lines["tensorflow"] == "ok" and lines["built-in"] == "ok"
    assert lines["display"] == "FAIL" and lines["capture"] == "FAIL"
    assert lines["dpi"] == lines["window"] == lines["vigembus"] == "n/a"
    assert f"- tensorflow: {metadata.version('tensorflow')}" in text
    assert f"- vizdoom: {metadata.version('vizdoom')}" in text and "- dxcam: -" in text
    assert "DISPLAY is not set" in text


def test_the_policys_buttons_reach_the_windows_pad_and_neutral_releases_them(monkeypatch):
    """The vgamepad backend on (a fake of) Windows' vgamepad, with its XUSB_BUTTON values."""
    import numpy as np

    from explorer.config import PadConfig
    from explorer.envs.live.pad import VGamepadPad

    desk = _desktop(monkeypatch)
    pad = VGamepadPad(PadConfig(buttons=("a", "lb", "rt")))
    pad.send(np.array([0, 0, 0, 1.0, 1.0, 1.0, 0.5]))
    assert desk.xinput_buttons[0] == [0x1000 | 0x100, 0, round(0.5 * 255)]  # A and LB, RT half pulled
    pad.send(np.array([0, 0, 0, 1.0, -1.0, 1.0, 0.0]))
    assert desk.xinput_buttons[0] == [0x100, 0, 0]
    pad.neutral()
    assert desk.xinput_buttons[0] == [0, 0, 0] and desk.xinput[0] == [0, 0, 0, 0]
