"""Stall detection: a capture that stopped stops a live run; start-up work that held a live capture back, or a
slow but live capture, does not."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from explorer.config import ConfigError, load
from explorer.envs.live.env import LiveEnv, StalledCapture
from explorer.run.driver import Driver
from explorer.testing.fakes import FakeScreen, RecordingPad

SHAPE = (16, 16, 1)
STALL_S = 0.4


def _frame(i: int) -> np.ndarray:
    return np.full(SHAPE, i % 256, np.uint8)


class StartUpWork:
    """An actor whose first decision does the work of a resumed run's start (a checkpoint restored, the policy
    traced on its first call) while holding ``busy``, what the capture thread's grabs need as well (on a
    loaded machine: the CPU, the interpreter); then it acts at once."""

    def __init__(self, busy: threading.Lock, seconds: float):
        self.busy, self.seconds, self.acted = busy, seconds, 0

    def act(self, step):
        if self.acted == 0:
            with self.busy:
                time.sleep(self.seconds)
        self.acted += 1
        return np.zeros(4, np.float32)

    def observe(self, step, action, next_step):
        return {}


def test_start_up_work_that_held_the_capture_back_is_not_a_stall():
    """The first tick comes 2.5 stall windows after capture start, and the capture, held back all that while,
    needs a moment more for its next grab: the loop waits for it rather than calling the capture stopped."""
    busy = threading.Lock()

    def grab(i: int) -> np.ndarray:
        busy.acquire()  # held back while the start-up work holds the lock
        busy.release()
        time.sleep(STALL_S / 4)  # a grab on a loaded machine
        return _frame(i)

    env = LiveEnv(FakeScreen(make=grab, shape=SHAPE), RecordingPad(), stack=2, ring_capacity=8, capture_fps=50,
                  hz=20, stall_s=STALL_S)
    actor = StartUpWork(busy, 2.5 * STALL_S)
    try:
        stats = Driver(env, actor).run(max_steps=10)
    finally:
        env.close()
    assert stats.steps == 10 and actor.acted == 10


def test_a_slow_but_live_capture_is_not_a_stall():
    """Each grab takes longer than the stall window (a capture slowed down by load): frames arrive late, and
    the loop waits for each rather than stopping."""
    screen = FakeScreen(make=lambda i: (time.sleep(1.5 * STALL_S), _frame(i))[1], shape=SHAPE)
    env = LiveEnv(screen, RecordingPad(), stack=2, ring_capacity=8, capture_fps=50, hz=20, stall_s=STALL_S)
    try:
        driver = Driver(env, StartUpWork(threading.Lock(), 0.0))

        def enough(t):
            if env.capture.grabs >= 5:
                driver.controls.request_stop("enough frames")

        driver.on_step(enough)
        stats = driver.run(max_seconds=60)
    finally:
        env.close()
    assert stats.stopped_by == "enough frames" and env.capture.grabs >= 5


def test_a_capture_that_stopped_is_still_a_stall_and_says_how_long_the_loop_waited():
    release = threading.Event()

    def grab(i: int) -> np.ndarray:
        if i >= 5:
            release.wait(30)  # the capture hangs (a window that stopped drawing, a stuck driver)
        return _frame(i)

    pad = RecordingPad()
    env = LiveEnv(FakeScreen(make=grab, shape=SHAPE), pad, stack=2, ring_capacity=8, capture_fps=50, hz=20,
                  stall_s=STALL_S, watchdog_s=0.15)
    try:
        with pytest.raises(StalledCapture, match=r"no new frame for .* s of them waiting for one "
                                                 r"\(capture.stall_seconds = 0.4\)"):
            Driver(env, StartUpWork(threading.Lock(), 0.0)).run(max_seconds=30)
    finally:
        release.set()
        env.close()
    assert pad.is_neutral and len(pad.sent) >= 1


@pytest.mark.parametrize(("fps", "stall"), [(0.5, 1.0), (1.0, 1.0), (2.0, 0.25)])
def test_a_capture_slower_than_the_stall_window_is_refused_at_load(fps, stall):
    with pytest.raises(ConfigError) as err:
        load(None, [f"capture.fps={fps}", f"capture.stall_seconds={stall}"])
    text = str(err.value)
    assert "\n" not in text and "capture.fps" in text and "capture.stall_seconds" in text, text
    load(None, [f"capture.fps={fps}", f"capture.stall_seconds={2.5 / fps}"])  # a window of two and a half frames
