"""A live game as an :class:`~explorer.core.Env`: screen capture in, pad out, in real time.

One object holds what real time needs: a capture thread filling a frame ring
at ``capture.fps``, the pad, a watchdog that centres the pad when no fresh
action arrives in time, and a fixed tick at ``control.hz``. The game does not
wait: :meth:`LiveEnv.step` sends the action, sleeps to the next tick, runs the
health checks and returns the newest frames. It measures itself: achieved
rate, capture-to-pad latency, missed ticks, dropped frames, watchdog trips.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from explorer.core import ExplorerError, Step
from explorer.envs.live.capture import CaptureThread
from explorer.envs.live.pad import Pad
from explorer.envs.live.screen import Screen, ScreenError
from explorer.envs.live.watchdog import Watchdog
from explorer.envs.ring import FrameRing
from explorer.timing import IdleWindow, Pacer


class StalledCapture(ExplorerError):
    """The capture thread stopped delivering frames."""


class LatencyHistogram:
    """Latencies of a whole run in constant memory: 0.1 ms bins up to 10 s (longer ones share the last bin).

    A live run can go on for days at 30 ticks a second; a list of every latency
    would grow without end. Percentiles come back as bin centres, within 0.05 ms.
    """

    bin_s = 1e-4

    def __init__(self, max_s: float = 10.0):
        self.counts = np.zeros(int(round(max_s / self.bin_s)) + 1, np.int64)
        self.n = 0

    def add(self, seconds: float) -> None:
        self.counts[min(max(int(seconds / self.bin_s), 0), len(self.counts) - 1)] += 1
        self.n += 1

    def __len__(self) -> int:
        return self.n

    def percentile_ms(self, q: float) -> float:
        """The ``q``-th percentile (0-100) in milliseconds; NaN before the first latency."""
        if not self.n:
            return float("nan")
        rank = q / 100.0 * (self.n - 1)
        i = int(np.searchsorted(np.cumsum(self.counts), rank, side="right"))
        return (i + 0.5) * self.bin_s * 1000.0


class LiveEnv:
    """Capture thread -> ring -> observation; action -> pad; a fixed tick; a watchdog.

    Args:
      screen: where frames come from (``grab() -> uint8[H, W, C]``).
      pad: where actions go (a :class:`~explorer.envs.live.pad.NullPad` sends nothing).
      stack: frames per observation ``k``.
      ring_capacity: frames the ring holds.
      capture_fps: frames grabbed per second.
      hz: agent steps per second.
      blank_s: uniform frames for this long stop the run (a black or minimised window).
      stall_s: no new frame for this long while the loop waits for one stops the run (a frame older than this
        at a tick makes the loop wait this long for a new one).
      watchdog_s: centre the pad when no action was sent for this long (None: no watchdog).
      first_frame_timeout_s: how long :meth:`reset` waits for the first frame.
      checks: more health checks run every tick (the game engine, ...); each raises to stop.
      stop: a stop request cuts the tick's sleep short.
      window: opened from each send until the next tick (and while paused), closed while a
        tick's work runs: when a learner thread may train without delaying an action.
    """

    def __init__(self, screen: Screen, pad: Pad, *, stack: int, ring_capacity: int, capture_fps: float, hz: float,
                 blank_s: float = 3.0, stall_s: float = 1.0, watchdog_s: float | None = None,
                 first_frame_timeout_s: float = 5.0, checks: Sequence[Callable[[], None]] = (),
                 stop: threading.Event | None = None, window: IdleWindow | None = None):
        self.screen = screen
        self.pad = pad
        self.stack = stack
        h, w, c = screen.shape
        self.frame_shape = (int(h), int(w), int(c))
        self.ring = FrameRing(ring_capacity, self.frame_shape)
        self.capture = CaptureThread(screen, self.ring, capture_fps, blank_s, lost_s=stall_s)
        self.pacer = Pacer(hz, stop=stop)
        self.stall_s = stall_s
        self.first_frame_timeout_s = max(first_frame_timeout_s, stall_s)
        self.checks = tuple(checks)
        self.watchdog = Watchdog(pad, watchdog_s) if watchdog_s else None
        self.latencies = LatencyHistogram()
        self.window = window
        self._obs_t = 0.0
        self._acting = False
        self._started = False

    def _frame_time(self) -> float:
        times = self.capture.grab_times
        return times[-1] if times else time.monotonic()

    def _observe(self, first: bool = False) -> Step:
        t = self._frame_time()
        return Step(self.ring.latest(self.stack), first=first, t=t)

    def reset(self) -> Step:
        """Start capture (once) and return the newest frames; a live game has one long episode."""
        if not self._started:
            self._started = True
            self.capture.start()
            if not self.ring.wait_for(0, timeout=self.first_frame_timeout_s):
                self.capture.check()
                raise ScreenError(f"no frame captured within {self.first_frame_timeout_s:.0f} s")
            if self.watchdog is not None:
                self.watchdog.start()
            self.pacer.start()
        step = self._observe(first=True)
        self._obs_t = time.monotonic()
        return step

    def step(self, action: np.ndarray | None) -> Step:
        if action is not None:
            self.pad.send(action)
            self.latencies.add(time.monotonic() - self._obs_t)
            self._acting = True
        if self.watchdog is not None:
            self.watchdog.feed()
        if self.window is not None:
            self.window.open(self.pacer.upcoming())
        self.pacer.wait()
        if self.window is not None:
            self.window.close()
        self.capture.check()
        for check in self.checks:
            check()
        step = self._observe()
        if time.monotonic() - step.t > self.stall_s:
            step = self._wait_for_picture(step)
        self._obs_t = step.t
        return step

    def _wait_for_picture(self, step: Step) -> Step:
        """The newest frame is older than ``stall_s``: wait that long for a new one, and stop if none comes.

        The loop's own work (a checkpoint restored, a function traced on its first call, an update beside it) can
        hold a live capture back on a loaded machine, and a slow capture leaves gaps: neither is a capture that
        stopped. Only one that delivers nothing while the loop waits for it, with the CPU left to it, is stalled.
        """
        waited = time.monotonic()
        if not self.capture.wait_for_picture(step.t, self.stall_s):
            self.capture.check()  # an error in the capture thread says more
            now = time.monotonic()
            raise StalledCapture(f"no new frame for {now - step.t:.1f} s, {now - waited:.1f} s of them waiting for "
                                 f"one (capture.stall_seconds = {self.stall_s:g}): the capture stopped delivering "
                                 "(window closed or moved off screen, display gone?)")
        self.capture.check()
        return self._observe()

    def idle(self) -> None:
        """Paused (a hotkey, the window not in front): the sticks centred once, the watchdog fed, a short wait."""
        if self._acting:
            self.pad.neutral()
            self._acting = False
        if self.watchdog is not None:
            self.watchdog.feed()
        if self.window is not None:
            self.window.open(time.monotonic() + 0.05)
        time.sleep(0.05)
        if self.window is not None:
            self.window.close()

    def neutral(self) -> None:
        self.pad.neutral()

    def stats(self) -> dict[str, Any]:
        lat = self.latencies
        return {"latency_p50_ms": round(lat.percentile_ms(50), 3), "latency_p95_ms": round(lat.percentile_ms(95), 3),
                "latency_p99_ms": round(lat.percentile_ms(99), 3), "missed_ticks": self.pacer.missed,
                "dropped_frames": self.capture.late, "watchdog_trips": self.watchdog.trips if self.watchdog else 0,
                # when the loop stalled (seconds after the start: the stall began there), and its longest gap; a
                # copy, so that a trip after this reading (the stall of shutting down) does not join the count's list
                "watchdog_trips_after_s": list(self.watchdog.trip_times[:self.watchdog.trips]) if self.watchdog else [],
                "longest_gap_ms": round(1e3 * self.watchdog.longest_gap_s, 1) if self.watchdog else None,
                "capture_fps": round(self.capture.achieved_fps(), 2)}

    def close(self) -> None:
        try:
            if self.watchdog is not None:
                self.watchdog.stop()
            self.capture.stop()
        finally:
            self.pad.close()
