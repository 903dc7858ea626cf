"""The control loop, one for every mode.

Each step: the clock delivers a fresh frame into the ring (the built-in game
advances one agent step; live mode waits for the next tick while the capture
thread fills the ring), the agent takes the newest frames and picks stick
values, the pad receives them, and the agent observes the transition.

Live mode keeps a fixed tick, feeds a watchdog that centres the pad when no
fresh action arrives in time, and measures achieved rate, capture→pad latency
and dropped frames. Whatever ends the loop, the pad ends neutral.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from explorer.agent.actors import Agent
from explorer.envs.pad import Pad, Watchdog, clamp, neutral_on_exit
from explorer.envs.ring import FrameRing
from explorer.envs.screen import CaptureThread


@dataclass
class Tick:
    """What the clock reports for one step."""

    frame_time: float  # monotonic time the newest frame reached the ring
    last: bool = False  # the step that ended an episode


class Clock(Protocol):
    """Paces the loop and fills the ring."""

    def begin(self) -> None:
        """Start: the ring holds at least one frame when this returns."""

    def tick(self) -> Tick:
        """Apply the pad's current sticks, then wait for the next frame."""

    def new_episode(self) -> None:
        """Start the next episode; the ring holds its first frame when this returns."""

    def end(self) -> None:
        """Stop whatever the clock started."""


class GameClock:
    """Synchronous built-in game: one engine step per tick, as fast as it runs."""

    def __init__(self, game: Any, ring: FrameRing):
        self.game = game
        self.ring = ring

    def begin(self) -> None:
        self.ring.reset()
        self.ring.push(self.game.grab())

    def tick(self) -> Tick:
        self.game.advance()
        self.ring.push(self.game.grab())
        return Tick(time.monotonic(), last=self.game.episode_ended)

    def new_episode(self) -> None:
        self.game.new_episode()
        self.begin()

    def end(self) -> None:
        pass


class StalledCapture(RuntimeError):
    """The capture thread stopped delivering frames."""


class NonFiniteAction(FloatingPointError):
    """The policy produced NaN or infinite stick values."""


class LiveClock:
    """Real time: a capture thread fills the ring; ticks come at a fixed rate.

    Each tick also runs the health checks: the capture thread's errors, a
    capture that delivered no frame for ``stall_s``, and any ``checks`` given
    (the learner thread, the game engine): each raises to end the run.
    """

    def __init__(self, capture: CaptureThread, ring: FrameRing, hz: float, first_frame_timeout_s: float = 5.0,
                 stall_s: float = 1.0, checks: tuple[Callable[[], None], ...] = ()):
        self.capture = capture
        self.ring = ring
        self.period = 1.0 / hz
        self.first_frame_timeout_s = first_frame_timeout_s
        self.stall_s = stall_s
        self.checks = checks
        self.missed_ticks = 0
        self._next = 0.0

    def begin(self) -> None:
        if not self.capture.alive:
            self.capture.start()
        if not self.ring.wait_for(0, timeout=self.first_frame_timeout_s):
            self.capture.check()
            raise TimeoutError(f"no frame captured within {self.first_frame_timeout_s:.0f} s")
        self._next = time.monotonic()

    def tick(self) -> Tick:
        self._next += self.period
        delay = self._next - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            missed = int(-delay / self.period)
            self.missed_ticks += missed
            self._next += missed * self.period
        self.capture.check()
        for check in self.checks:
            check()
        times = self.capture.grab_times
        now = time.monotonic()
        last = times[-1] if times else now
        if now - last > self.stall_s:
            raise StalledCapture(f"no new frame for {now - last:.1f} s: the capture stopped delivering "
                                 "(window closed or moved off screen, display gone?)")
        return Tick(last)

    def new_episode(self) -> None:
        pass

    def end(self) -> None:
        self.capture.stop()


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
        """The ``q``-th percentile (0–100) in milliseconds; NaN before the first latency."""
        if not self.n:
            return float("nan")
        rank = q / 100.0 * (self.n - 1)
        i = int(np.searchsorted(np.cumsum(self.counts), rank, side="right"))
        return (i + 0.5) * self.bin_s * 1000.0


@dataclass
class LoopStats:
    """Figures from one run of the loop."""

    steps: int = 0
    episodes: int = 0
    seconds: float = 0.0
    latencies: LatencyHistogram = field(default_factory=LatencyHistogram)  # capture → pad, per step
    missed_ticks: int = 0
    dropped_frames: int = 0
    watchdog_trips: int = 0
    stopped_by: str = "steps"

    @property
    def hz(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def latency_ms(self, q: float) -> float:
        return self.latencies.percentile_ms(q)

    def summary(self) -> dict[str, float | int | str]:
        return {
            "steps": self.steps, "episodes": self.episodes, "seconds": round(self.seconds, 3),
            "hz": round(self.hz, 2), "latency_p50_ms": round(self.latency_ms(50), 3),
            "latency_p95_ms": round(self.latency_ms(95), 3), "latency_p99_ms": round(self.latency_ms(99), 3),
            "missed_ticks": self.missed_ticks, "dropped_frames": self.dropped_frames,
            "watchdog_trips": self.watchdog_trips, "stopped_by": self.stopped_by,
        }


class Controls:
    """Run-time switches shared with hotkeys and signal handlers: stop and pause."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.paused = threading.Event()
        self.reason = ""

    def request_stop(self, reason: str) -> None:
        self.reason = self.reason or reason
        self.stop.set()

    def toggle_pause(self) -> None:
        if self.paused.is_set():
            self.paused.clear()
        else:
            self.paused.set()


StepHook = Callable[[int, np.ndarray, dict[str, float], Tick], None]


def run_loop(clock: Clock, ring: FrameRing, agent: Agent, pad: Pad, stack: int, *,
             max_steps: int | None = None, max_seconds: float | None = None,
             controls: Controls | None = None, watchdog_s: float | None = None,
             on_step: StepHook | None = None, on_episode: Callable[[int], None] | None = None,
             focused: Callable[[], bool] | None = None, recorder: Any = None) -> LoopStats:
    """Run the loop until ``max_steps``, ``max_seconds`` or a stop request.

    Args:
      clock: :class:`GameClock` or :class:`LiveClock`.
      ring: the frame ring the clock fills.
      agent: picks actions and observes transitions.
      pad: receives the actions; neutral on every way out.
      stack: frames per observation.
      max_steps: stop after this many agent steps.
      max_seconds: stop after this much wall time.
      controls: stop/pause switches (hotkeys, signals).
      watchdog_s: centre the pad when no action was sent for this long.
      on_step: ``on_step(step, action, metrics, tick)`` after each step.
      on_episode: ``on_episode(episodes_finished)`` after an episode ends and the next began.
      focused: ``focused()`` is False while the game window is not in front; acting
        pauses (sticks neutral) meanwhile.
      recorder: an :class:`explorer.envs.recorder.LoopRecorder`; gets each episode's first
        frame and every step (its writes happen off this thread).

    Returns:
      The run's :class:`LoopStats`.
    """
    controls = controls or Controls()
    stats = LoopStats()
    watchdog = Watchdog(pad, watchdog_s) if watchdog_s else None
    t0 = time.monotonic()
    with neutral_on_exit(pad):
        try:
            clock.begin()
            if watchdog:
                watchdog.start()
            obs = ring.latest(stack)
            obs_time = time.monotonic()
            if recorder is not None:
                recorder.begin(obs[-1].numpy(), obs_time)
            first = True
            was_paused = False
            while True:
                if max_steps is not None and stats.steps >= max_steps:
                    break
                if max_seconds is not None and time.monotonic() - t0 >= max_seconds:
                    stats.stopped_by = "time"
                    break
                if controls.stop.is_set():
                    stats.stopped_by = controls.reason or "stop"
                    break
                if controls.paused.is_set() or (focused is not None and not focused()):
                    if not was_paused:
                        pad.neutral()
                        was_paused = True
                    if watchdog:
                        watchdog.feed()
                    controls.stop.wait(0.05)
                    continue
                was_paused = False
                raw = np.asarray(agent.act(obs), np.float32)
                if not np.all(np.isfinite(raw)):
                    raise NonFiniteAction(f"the policy produced non-finite stick values {raw.tolist()} at step "
                                          f"{stats.steps}: the weights have diverged; stopping with the pad neutral")
                action = clamp(raw)
                pad.send(action)
                stats.latencies.add(time.monotonic() - obs_time)
                if watchdog:
                    watchdog.feed()
                tick = clock.tick()
                next_obs = ring.latest(stack)
                obs_time = tick.frame_time
                metrics = agent.observe(obs, action, next_obs, first, tick.last)
                if recorder is not None:
                    recorder.step(action, metrics.get("novelty"), next_obs[-1].numpy(), tick.last, tick.frame_time)
                stats.steps += 1
                if on_step is not None:
                    on_step(stats.steps, action, metrics, tick)
                first = False
                obs = next_obs
                if tick.last:
                    stats.episodes += 1
                    clock.new_episode()
                    if on_episode is not None:
                        on_episode(stats.episodes)
                    obs = ring.latest(stack)
                    obs_time = time.monotonic()
                    if recorder is not None:
                        recorder.begin(obs[-1].numpy(), obs_time)
                    first = True
        finally:
            if watchdog:
                watchdog.stop()
                stats.watchdog_trips = watchdog.trips
            clock.end()
            stats.seconds = time.monotonic() - t0
            stats.missed_ticks = getattr(clock, "missed_ticks", 0)
            capture = getattr(clock, "capture", None)
            if capture is not None:
                stats.dropped_frames = capture.late
    return stats
