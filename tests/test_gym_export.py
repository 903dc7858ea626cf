"""explorer's games as Gymnasium envs: ``explorer/Doom-v0`` and ``explorer/LiveWindow-v0`` pass Gymnasium's
env checker, work under its wrappers, and leave the pad neutral on close, after a step that raised,
when the caller stops stepping, and when Ctrl-C ends the caller's script without close()."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from explorer.core import ExplorerError
from explorer.testing.fakes import FakeScreen, RecordingPad

gym = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

from explorer.envs.gym import export  # noqa: E402

LIVE = "explorer.envs.gym.export:explorer/LiveWindow-v0"
DOOM = "explorer.envs.gym.export:explorer/Doom-v0"
FULL = {"sticks": np.array([1.0, -1.0, 0.5, 1.0], np.float32), "buttons": np.array([1], np.int8)}


def picture(i: int = 0) -> np.ndarray:
    """A frame with detail (not uniform, so capture does not call it blank)."""
    frame = np.zeros((16, 16, 3), np.uint8)
    frame[:, :, 0] = np.arange(16, dtype=np.uint8)[None] * 16
    return frame


def live(pad: RecordingPad, screen: FakeScreen | None = None, **kwargs):
    return gym.make(LIVE, screen=screen or FakeScreen([picture()]), pad=pad, hz=200.0, width=16, height=16, **kwargs)


def test_live_window_passes_the_env_checker_and_close_releases_everything():
    pad = RecordingPad()
    # made directly: the checker's second make from the spec would copy the fake screen and pad (and fail)
    env = export.make_live(render_mode="rgb_array", screen=FakeScreen([picture()]), pad=pad, hz=200.0, width=16,
                           height=16)
    check_env(env)
    np.testing.assert_array_equal(env.render(), picture())
    env.reset(seed=0)
    env.step(FULL)
    assert not pad.is_neutral and pad.state[4] == 1.0  # sticks pushed, A pressed
    env.close()
    assert pad.is_neutral and pad.calls[-1][0] == "close"
    np.testing.assert_array_equal(pad.state, np.zeros(5, np.float32))


def test_a_step_that_raises_leaves_the_live_pad_neutral():
    broken = threading.Event()

    def grab(i: int) -> np.ndarray:
        if broken.is_set():
            raise OSError("the display went away")
        return picture(i)

    pad = RecordingPad()
    env = live(pad, FakeScreen(make=grab, shape=(16, 16, 3)))
    env.reset()
    env.step(FULL)
    assert not pad.is_neutral
    broken.set()
    with pytest.raises(ExplorerError, match="the display went away"):
        for _ in range(100_000):  # until the capture thread's error reaches a step
            env.step(FULL)
    assert pad.is_neutral and pad.calls[-1][0] == "neutral"  # before close: the raise itself let go
    env.close()
    assert pad.is_neutral and pad.calls[-1][0] == "close"


def test_the_live_pad_goes_neutral_when_the_caller_stops_stepping():
    pad = RecordingPad()
    env = live(pad)
    env.reset()
    env.step(FULL)
    deadline = time.monotonic() + 30.0
    while not pad.is_neutral and time.monotonic() < deadline:  # the watchdog's own thread centres it
        time.sleep(0.01)
    assert pad.is_neutral and pad.calls[-1][0] == "neutral"
    env.close()


#: a user's script: the exported live env stepped with the sticks pushed and A held, never closed; "ready"
#: once the pad is held, then its loop (argv[2]): steps, or its own work between two steps
CTRL_C_SCRIPT = textwrap.dedent("""
    import sys, time
    import gymnasium as gym
    import numpy as np
    from explorer.testing.fakes import FakeScreen, RecordingPad

    frame = np.zeros((16, 16, 3), np.uint8)
    frame[:, :, 0] = np.arange(16, dtype=np.uint8)[None] * 16
    pad = RecordingPad(log=sys.argv[1])
    hz = 200.0 if sys.argv[2] == "steps" else 0.5  # between steps: a watchdog (3 ticks) too slow to centre it first
    env = gym.make("explorer.envs.gym.export:explorer/LiveWindow-v0", screen=FakeScreen([frame]), pad=pad, hz=hz,
                   width=16, height=16)
    env.reset()
    full = {"sticks": np.array([1.0, -1.0, 0.5, 1.0], np.float32), "buttons": np.array([1], np.int8)}
    env.step(full)
    print("ready", flush=True)
    while True:
        if sys.argv[2] == "steps":
            env.step(full)
        else:
            time.sleep(3600)  # the script's own work, the pad still held by the last step
""")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child is a POSIX signal")
@pytest.mark.parametrize("where", ["steps", "between"])
def test_ctrl_c_ending_a_script_that_never_closes_the_env_leaves_the_live_pad_neutral(tmp_path, where):
    log = tmp_path / "pad.log"
    child = subprocess.Popen([sys.executable, "-c", CTRL_C_SCRIPT, str(log), where], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = child.stdout.readline()  # the pad is held now
        assert line == "ready\n", child.communicate(timeout=120)[1][-2000:]
        held = log.read_text().splitlines()
        assert held[-1].split()[0] == "send" and [float(v) for v in held[-1].split()[1:]] == [1, -1, 0.5, 1, 1]
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert "KeyboardInterrupt" in err and child.returncode != 0
    calls = log.read_text().splitlines()
    last = [float(v) for v in calls[-1].split()[1:]]
    assert last == [0.0] * 5, calls[-3:]  # sticks centred, A released, whatever the script was doing
    assert [c.split()[0] for c in calls[-2:]] == ["neutral", "close"], calls[-3:]


def test_live_window_under_record_episode_statistics_and_frame_stack():
    pad = RecordingPad()
    env = gym.wrappers.RecordEpisodeStatistics(gym.wrappers.FrameStackObservation(live(pad), 4))
    obs, _ = env.reset()
    assert obs.shape == (4, 16, 16, 3) and obs.dtype == np.uint8
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(FULL)
    assert not terminated and not truncated and "episode" not in info  # a live game never ends
    np.testing.assert_array_equal(obs[-1], picture())
    env.close()
    assert pad.is_neutral


@pytest.mark.slow
def test_doom_passes_the_env_checker_and_its_episodes_are_truncated_by_the_step_limit():
    env = gym.make(DOOM, episode_steps=12, width=32, height=32)
    try:
        check_env(env.unwrapped)
        wrapped = gym.wrappers.RecordEpisodeStatistics(gym.wrappers.FrameStackObservation(env, 3))
        obs, _ = wrapped.reset(seed=5)
        assert obs.shape == (3, 32, 32, 3)
        ends = []
        for _ in range(12):
            obs, reward, terminated, truncated, info = wrapped.step(FULL)
            ends.append(terminated or truncated)
        assert ends == [False] * 11 + [True] and truncated and not terminated and info["episode"]["l"] == 12
        assert info["position"].shape == (2,)
        doom = env.unwrapped.env
        assert np.any(doom.game.action != 0) and doom.game.buttons[0] == 1.0  # held by the last step
    finally:
        env.close()
    np.testing.assert_array_equal(doom.game.action, np.zeros(4, np.float32))
    np.testing.assert_array_equal(doom.game.buttons, np.zeros(1, np.float32))


@pytest.mark.slow
def test_doom_reset_with_a_seed_repeats_the_episode():
    env = gym.make(DOOM, episode_steps=30, width=32, height=32)
    try:
        runs = []
        for _ in range(2):
            obs, _ = env.reset(seed=11)
            frames = [obs] + [env.step(FULL)[0] for _ in range(5)]
            runs.append(np.stack(frames))
        np.testing.assert_array_equal(runs[0], runs[1])
    finally:
        env.close()


def test_bad_settings_are_one_line_config_errors():
    from explorer.config import ConfigError

    with pytest.raises(ConfigError, match="observation.width"):
        export.make_live(screen=FakeScreen([picture()]), pad=RecordingPad(), width=0)
