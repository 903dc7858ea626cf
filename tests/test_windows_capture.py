"""Windows capture on a fake desktop (explorer.testing.fakes_windows): DPI awareness and display scaling,
monitors left of and above the primary, the dxcam backend (new frames only, lost outputs), the
DirectX black-frame symptom, focus by window handle, and a closed window stopping the capture."""

from __future__ import annotations

import time

import numpy as np
import pytest

from explorer.config import load
from explorer.envs.geometry import Region, observation_shape
from explorer.envs.live import winapi
from explorer.envs.live.capture import CaptureThread, choose_backend, make_screen
from explorer.envs.live.desktop import focus_check
from explorer.envs.live.dxcam_screen import DxcamScreen, DxcamUnavailable, dxcam_outputs
from explorer.envs.live.mss_screen import MssScreen
from explorer.envs.live.screen import OutputLost, ScreenError
from explorer.envs.ring import FrameRing
from explorer.testing.fakes_windows import FakeDesktop, FakeMonitor, FakeWindow, fake_dxcam

GAME = "Game Of Tests"


def _config(*overrides: str):
    return load(None, ["capture.source=window", f"capture.window_title={GAME!r}", *overrides])


def _desktop(monitors, window: tuple[int, int, int, int], **kw) -> FakeDesktop:
    return FakeDesktop(monitors, [FakeWindow(101, "Terminal", 0, 0, 300, 200),
                                  FakeWindow(202, f"{GAME} v1.0", *window, **kw)], foreground=101)


ONE_AT_100 = [FakeMonitor(0, 0, 1920, 1080, 1.0)]
ONE_AT_150 = [FakeMonitor(0, 0, 2560, 1440, 1.5)]
# a second monitor left of and above the primary (negative coordinates), at another scaling
TWO = [FakeMonitor(0, 0, 2560, 1440, 1.5), FakeMonitor(-1920, -300, 1920, 1080, 1.0)]


def _backend(name: str, config):
    return MssScreen(config.capture, config.observation) if name == "mss" else DxcamScreen(config.capture, config.observation)


@pytest.mark.parametrize("backend", ["mss", "dxcam"])
@pytest.mark.parametrize("monitors, window", [
    (ONE_AT_100, (100, 80, 1280, 720)),
    (ONE_AT_150, (600, 300, 1280, 720)),      # at 150 % an unaware process would be told 400,200 853x480
    (TWO, (-1500, -100, 1024, 768)),          # wholly on the second monitor, left of and above the primary
])
def test_window_client_area_is_captured_in_physical_pixels(monkeypatch, backend, monitors, window):
    desk = _desktop(monitors, window).install(monkeypatch)
    config = _config(f"capture.backend={backend!r}")
    screen = _backend(backend, config)
    left, top, width, height = window
    assert screen.region == Region(left, top, width, height)
    raw = screen.grab_raw()
    np.testing.assert_array_equal(raw, desk.pixels(left, top, width, height))  # the window's own pixels
    if backend == "dxcam":
        assert screen.grab() is None  # nothing changed on screen since
        desk.paint()
    assert screen.grab().shape == observation_shape(config.observation)
    assert desk.awareness == 2  # per-monitor DPI-aware ...
    assert desk.events and all(aware == 2 for _, aware in desk.events)  # ... before any window geometry was read
    screen.close()


def test_without_dpi_awareness_the_fake_reports_scaled_rectangles(monkeypatch):
    """The fake models what the test above guards against: pywinctl used before the process is made
    DPI-aware sets 'system' awareness for good, and a window on a monitor scaled differently from the
    primary then comes back in scaled pixels."""
    desk = _desktop(TWO, (-1500, -100, 1024, 768)).install(monkeypatch)
    import pywinctl
    (game,) = [w for w in pywinctl.getAllWindows() if GAME in w.title]
    assert tuple(game.getClientFrame()) == (-1290, 0, 245, 1151)  # not (-1500, -100, -476, 668)
    assert desk.awareness == 1
    assert winapi.make_dpi_aware() == "system"  # too late to become per-monitor aware


def test_dxcam_maps_desktop_regions_to_the_output_that_holds_them(monkeypatch):
    desk = FakeDesktop(TWO).install(monkeypatch)
    config = load(None, ["capture.backend='dxcam'", "capture.left=-1800", "capture.top=-250", "capture.width=640",
                         "capture.height=480"])
    screen = DxcamScreen(config.capture, config.observation)
    assert screen.output.index == 1 and screen.local == (120, 50, 760, 530)  # (left, top, right, bottom) on monitor 2
    import dxcam
    (camera,) = dxcam.created
    assert camera.output_color == "BGRA"  # no OpenCV needed
    np.testing.assert_array_equal(screen.grab_raw(), desk.pixels(-1800, -250, 640, 480))
    whole = load(None, ["capture.backend='dxcam'", "capture.source='monitor'", "capture.monitor=2"]).capture
    assert DxcamScreen(whole, config.observation).local == (0, 0, 1920, 1080)


def test_dxcam_refuses_a_region_across_two_monitors_and_mss_captures_it(monkeypatch):
    desk = FakeDesktop([FakeMonitor(0, 0, 1920, 1080), FakeMonitor(1920, 0, 1920, 1080)]).install(monkeypatch)
    across = load(None, ["capture.left=1800", "capture.top=100", "capture.width=300", "capture.height=200"])
    with pytest.raises(ScreenError, match="spans 2 monitors.*capture.backend = \"mss\""):
        DxcamScreen(across.capture, across.observation)
    np.testing.assert_array_equal(MssScreen(across.capture, across.observation).grab_raw(),
                                  desk.pixels(1800, 100, 300, 200))
    everything = load(None, ["capture.source='monitor'", "capture.monitor=0"])
    with pytest.raises(ScreenError, match="set capture.monitor to one monitor"):
        DxcamScreen(everything.capture, everything.observation)


def test_a_region_off_every_monitor_is_refused(monkeypatch):
    FakeDesktop(TWO).install(monkeypatch)  # the desktop's bounding box has an empty corner below monitor 2
    gap = load(None, ["capture.left=-1000", "capture.top=900", "capture.width=200", "capture.height=200"])
    with pytest.raises(ScreenError, match="outside the screen.*2: 1920x1080 at -1920,-300"):
        MssScreen(gap.capture, gap.observation)


def test_dxcam_without_its_factory_knows_the_primary_output_only(monkeypatch):
    desk = FakeDesktop(TWO).install(monkeypatch)
    bare = fake_dxcam(desk, with_factory=False)
    assert [(o.index, o.region) for o in dxcam_outputs(bare)] == [(0, Region(0, 0, 2560, 1440))]
    monkeypatch.setitem(__import__("sys").modules, "dxcam", bare)
    second = load(None, ["capture.backend='dxcam'", "capture.left=-1800", "capture.top=-250"])
    with pytest.raises(ScreenError, match="on no monitor dxcam can capture.*primary monitor"):
        DxcamScreen(second.capture, second.observation)


def test_auto_backend_is_dxcam_on_windows_when_installed(monkeypatch):
    FakeDesktop(ONE_AT_100).install(monkeypatch)
    assert choose_backend("auto")[0] == "dxcam"
    screen = make_screen(load().capture, load().observation)
    assert isinstance(screen, DxcamScreen) and screen.note == "auto: Windows with dxcam installed"
    assert isinstance(make_screen(load(None, ["capture.backend='mss'"]).capture, load().observation), MssScreen)


def test_auto_backend_is_mss_without_dxcam_or_off_windows(monkeypatch):
    FakeDesktop(ONE_AT_100).install(monkeypatch, dxcam=False)
    backend, why = choose_backend("auto")
    assert backend == "mss" and "not installed" in why
    with pytest.raises(ScreenError, match="dxcam is not installed: pip install dxcam"):
        choose_backend("dxcam")
    monkeypatch.setattr(winapi, "is_windows", lambda: False)
    assert choose_backend("auto") == ("mss", "auto: not Windows")
    with pytest.raises(ScreenError, match="needs Windows"):
        choose_backend("dxcam")


def test_auto_falls_back_to_mss_when_desktop_duplication_cannot_start(monkeypatch):
    desk = FakeDesktop(ONE_AT_100).install(monkeypatch)
    desk.lost = True  # e.g. a Remote Desktop session: creating the duplication fails
    screen = make_screen(load().capture, load().observation)
    assert isinstance(screen, MssScreen) and screen.note.startswith("auto: dxcam could not start")
    with pytest.raises(DxcamUnavailable, match="Remote Desktop"):
        make_screen(load(None, ["capture.backend='dxcam'"]).capture, load().observation)


def _capture(screen, lost_s: float = 1.0) -> CaptureThread:
    return CaptureThread(screen, FrameRing(8, screen.shape), fps=60, lost_s=lost_s)


def test_unchanged_dxcam_frames_are_counted_not_pushed_and_are_no_stall(monkeypatch):
    desk = _desktop(ONE_AT_100, (100, 80, 640, 480)).install(monkeypatch)
    screen = DxcamScreen(_config().capture, _config().observation)
    capture = _capture(screen)
    capture._grab_once()
    for _ in range(5):  # the game stands still (or the player paused it)
        capture._grab_once()
    assert (capture.grabs, capture.unchanged, capture.ring.count) == (1, 5, 1)
    assert len(capture.grab_times) == 6  # every grab confirmed the picture: the live clock sees no stall
    capture.check()
    desk.paint()  # the picture changes
    capture._grab_once()
    assert (capture.grabs, capture.ring.count) == (2, 2)


def test_a_lost_output_is_counted_reported_and_recovered(monkeypatch):
    desk = _desktop(ONE_AT_100, (100, 80, 640, 480)).install(monkeypatch)
    screen = DxcamScreen(_config().capture, _config().observation, retry_s=0.0)
    capture = _capture(screen, lost_s=0.0)
    capture._grab_once()
    desk.lost = True  # alt-tab into an exclusive full-screen game
    capture._grab_once()
    capture._grab_once()  # reopening fails while the output is gone
    assert capture.lost == 2 and len(capture.grab_times) == 1
    assert "Desktop Duplication lost the monitor at 0,0" in capture.lost_reason
    time.sleep(0.01)
    with pytest.raises(ScreenError, match="no picture for .* s: Desktop Duplication lost .*borderless windowed"):
        capture.check()
    import dxcam
    assert dxcam.created[0].is_released  # the lost camera was let go
    desk.lost = False
    desk.paint()
    capture._grab_once()
    assert screen.recoveries == 1 and capture.grabs == 2 and len(dxcam.created) == 2
    capture.check()  # picture back: no error


def test_a_resolution_change_reopens_on_the_window_where_it_now_is(monkeypatch):
    desk = _desktop(ONE_AT_100, (1200, 600, 640, 400)).install(monkeypatch)
    screen = DxcamScreen(_config().capture, _config().observation, retry_s=0.0)
    assert screen.grab_raw() is not None
    desk.set_resolution(0, 1280, 720)
    game = desk.window(202)
    game.left, game.top = 600, 300  # the game moved its window into the smaller screen
    assert screen.grab_raw() is None  # dxcam recovered the output itself: no frame this time
    with pytest.raises(OutputLost, match="Invalid Region"):
        screen.grab_raw()  # the old region no longer fits the output
    np.testing.assert_array_equal(screen.grab_raw(), desk.pixels(600, 300, 640, 400))
    assert screen.region == Region(600, 300, 640, 400) and screen.recoveries == 1


@pytest.mark.parametrize("backend", ["mss", "dxcam"])
def test_a_closed_or_renamed_window_stops_the_capture(monkeypatch, backend):
    desk = _desktop(TWO, (-1500, -100, 640, 480)).install(monkeypatch)
    desk.windows.append(FakeWindow(303, "Desktop", -1920, -300, 1920, 1080))  # what lies under the game
    screen = _backend(backend, _config(f"capture.backend={backend!r}", "capture.window_check_s=0.001"))
    time.sleep(0.002)
    assert screen.grab_raw() is not None and screen.watch.checks >= 1
    desk.window(202).title = "Game Over"
    time.sleep(0.002)
    with pytest.raises(ScreenError, match=f"'{GAME} v1.0' is now titled 'Game Over', without '{GAME}'"):
        screen.grab_raw()
    desk.window(202).title = f"{GAME} v1.0"
    desk.close_window(202)
    capture = _capture(screen)
    time.sleep(0.002)
    capture._run()  # runs until the grab fails
    with pytest.raises(ScreenError, match=f"capture stopped: the captured window '{GAME} v1.0' was closed: stopping"):
        capture.check()


def test_the_window_check_runs_at_its_rate_not_every_frame(monkeypatch):
    _desktop(ONE_AT_100, (100, 80, 640, 480)).install(monkeypatch)
    screen = MssScreen(_config("capture.window_check_s=3600").capture, _config().observation)
    for _ in range(20):
        screen.grab_raw()
    assert screen.watch.checks == 0


def test_black_gdi_frames_of_a_directx_game_name_the_fix(monkeypatch):
    _desktop(ONE_AT_100, (100, 80, 640, 480), directx=True).install(monkeypatch)
    config = _config("capture.backend='mss'")
    screen = MssScreen(config.capture, config.observation)
    assert screen.grab_raw().max() == 0  # GDI sees the DirectX window black
    capture = CaptureThread(screen, FrameRing(8, screen.shape), fps=60, blank_s=0.0)
    capture._grab_once()
    capture._grab_once()
    with pytest.raises(ScreenError, match="borderless windowed mode, or set capture.backend = \"dxcam\""):
        capture.check()
    dx = DxcamScreen(_config().capture, config.observation)
    assert dx.grab_raw().std() > 50  # Desktop Duplication sees the game


def test_focus_is_the_game_window_by_handle(monkeypatch):
    desk = _desktop(ONE_AT_100, (100, 80, 640, 480)).install(monkeypatch)
    desk.windows.append(FakeWindow(404, f"{GAME} - Web browser", 0, 0, 800, 600))
    focused = focus_check(GAME + " v1")
    assert focused is not None and focused() is False  # the terminal is in front
    desk.foreground = 404  # a window whose title also contains the game's name
    time.sleep(0.21)
    assert focused() is False
    desk.foreground = 202
    time.sleep(0.21)
    assert focused() is True
    monkeypatch.setattr(winapi, "is_windows", lambda: False)
    assert focus_check(GAME) is None


def test_a_still_game_does_not_stall_the_live_clock(monkeypatch):
    """The real capture thread and live clock over dxcam: the picture stays the same for longer than
    capture.stall_seconds (a paused game), and the run goes on; only the first frame enters the ring."""
    from explorer.envs.live.env import LiveEnv
    from explorer.envs.live.pad import NullPad
    _desktop(ONE_AT_100, (100, 80, 640, 480)).install(monkeypatch)
    screen = DxcamScreen(_config().capture, _config().observation)
    env = LiveEnv(screen, NullPad(), stack=1, ring_capacity=8, capture_fps=60, hz=20, stall_s=0.5)
    env.reset()
    try:
        for _ in range(30):  # 1.5 s of ticks, three times the stall limit
            env.step(None)
    finally:
        env.close()
    assert env.ring.written == 1 and env.capture.grabs == 1 and env.capture.unchanged > 30
