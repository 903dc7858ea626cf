"""Live capture on a real X display (a private Xvfb): mss, window lookup, `explorer play --dry-run`."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from explorer import cli
from explorer.config import load
from explorer.envs.live.desktop import find_window
from explorer.envs.live.mss_screen import MssScreen
from explorer.envs.live.screen import ScreenError

pytestmark = pytest.mark.display


@pytest.fixture
def doom_window(xvfb):
    """A visible ViZDoom window on the private display."""
    from explorer.envs import make_game
    game = make_game(load(None, ["game.visible=true", "game.resolution='320x240'"]))
    for _ in range(5):
        game.advance()
    time.sleep(0.3)
    yield game
    game.close()


def test_window_is_found_by_title_and_captured(doom_window):
    region = find_window("vizdoom")
    assert (region.width, region.height) == (320, 240)
    screen = MssScreen(load(None, ["capture.source=window", "capture.window_title=ViZDoom"]).capture, load().observation)
    raw = screen.grab_raw()
    assert raw.shape == (240, 320, 3) and raw.std() > 5  # the game's picture, not black
    assert screen.grab().shape == (64, 64, 3)  # colour observations by default
    grey = MssScreen(screen.capture, load(None, ["observation.grayscale=true"]).observation)
    assert grey.grab().shape == (64, 64, 1)


def test_window_lookup_errors_list_the_candidates(doom_window):
    with pytest.raises(ScreenError, match="no window with 'Quake'.*VIZDOOM"):
        find_window("Quake")


def test_region_outside_the_screen_is_refused(xvfb):
    config = load(None, ["capture.left=900", "capture.width=256"])
    with pytest.raises(ScreenError, match="outside the screen"):
        MssScreen(config.capture, config.observation)


def test_play_dry_run_captures_at_the_configured_rate(doom_window, tmp_path):
    region = find_window("vizdoom")
    rc = cli.main(["play", "--dry-run", "--region", f"{region.left},{region.top},256,200", "--seconds", "2",
                   "--out", str(tmp_path), "--set", "control.countdown_s=0", "--set", "capture.fps=20",
                   "--set", "control.hz=20", "--set", "learner.networks.filters=[8, 8]", "--set", "learner.networks.hidden=32", "--set", "learner.networks.feature=32"])
    assert rc == 0
    (run,) = list(tmp_path.iterdir())
    summary = json.loads((run / "summary.json").read_text())
    assert summary["dry_run"] is True
    assert 0 < summary["capture_fps"] <= 21, summary  # rate-limited to the target
    loop = summary["loop"]
    # It acted, and never ahead of its tick (behind it on a loaded machine, counting the ticks it missed).
    assert loop["stopped_by"] == "time" and 0 < loop["steps"] + loop["missed_ticks"] <= 20 * loop["seconds"] + 2, loop
    assert loop["steps"] > 0, loop


def test_doctor_reports_display_and_capture(xvfb, capsys):
    rc = cli.main(["doctor"])
    out = capsys.readouterr().out
    lines = {line.split()[1]: line.split()[0] for line in out.splitlines() if line[:1] in "okFm" and len(line.split()) > 1}
    assert lines.get("display") == "ok" and lines.get("capture") == "ok" and lines.get("tensorflow") == "ok"
    assert lines.get("pad") == "FAIL"  # no /dev/uinput on this machine: reported, with the fix
    assert "uinput" in out and rc == 1
    assert np.isfinite(rc)


def test_play_on_the_real_time_test_bed_sees_the_game_and_moves_the_player(xvfb, tmp_path, monkeypatch):
    """`explorer play --game`: ViZDoom at 35 tics/s in a window, found by title, captured with mss,
    driven through the pad bridge by a policy that walks forward."""
    from explorer.agent.actor import RandomActor
    from explorer.run.play import play

    frames = []

    class Forward(RandomActor):
        def act(self, step):
            frames.append(np.asarray(step.obs)[-1].copy())
            return np.array([0.3, 0.0, 0.0, 1.0], np.float32)  # walk forward, turning a little

    config = load(None, [f"run.dir={str(tmp_path)!r}", "control.countdown_s=0", "control.max_seconds=3",
                         "capture.source=window", "capture.window_title=vizdoom", "game.realtime=true",
                         "game.visible=true", "control.hz=20"])
    summary = play(config, with_game=True, actor=Forward())
    assert summary["game"]["tics"] >= 2.5 * 35 * 0.8  # the engine ran in real time on its own clock
    assert summary["game"]["path_length"] > 50  # the sticks moved the player
    assert summary["loop"]["steps"] >= 40
    stack = np.stack(frames[5:])
    assert stack.std() > 5  # the game's picture, not black
    assert np.abs(np.diff(stack.astype(int), axis=0)).mean() > 0.5  # and it changes as the player moves


def test_real_time_position_never_waits_for_the_engine_thread(xvfb):
    """The engine thread holds the engine from one tic to the next; the control loop reads the
    position for coverage every few steps and must not wait for it (that stalled ticks by up to 0.25 s)."""
    import threading

    from explorer.envs import make_game
    game = make_game(load(None, ["game.realtime=true", "game.visible=true"]))
    try:
        game.action = np.array([0.0, 0.0, 0.0, 1.0], np.float32)  # walk forward
        start = game.position()
        deadline = time.monotonic() + 300  # only a guard against a hang: it waits for the tics
        while game.tics < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert game.tics >= 20, "the engine thread did not run"
        with game._lock:  # the engine is mid-tic, as it is most of the time
            got = []
            reader = threading.Thread(target=lambda: got.append(game.position()))
            reader.start()
            reader.join(timeout=2.0)
            assert got, "position() waited for the engine thread's lock"
        moved = got[0]
        assert np.hypot(moved.x - start.x, moved.y - start.y) > 10  # and it follows the player
    finally:
        game.action = np.zeros(4, np.float32)
        game.close()
