"""The one loop every mode runs: env -> actor -> env, with observers.

Each step the actor picks an action for the env's newest observation, the env
applies it and advances (the built-in game runs its tics; a live game sleeps
to the next tick; a session reads its next frame), the actor takes in what
followed (novelty, context, its adder), and every observer registered with
:meth:`Driver.on_step` sees the transition: the inline learner, coverage,
logging, the recorder, checkpoints. Modes differ only in their parts.

Whatever ends the loop (its budget, a stop request, an exception, Ctrl-C or
SIGTERM) the env ends neutral: sticks centred, buttons released. A non-finite
action stops the run before it reaches the pad.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from explorer.core import Actor, EndOfData, Env, ExplorerError, Step, clamp
from explorer.envs.live.pad import neutral_on_exit


class NonFiniteAction(ExplorerError, FloatingPointError):
    """The policy produced NaN or infinite stick values."""


@dataclass
class Transition:
    """What observers see after each step.

    Attributes:
      step: the step the action was taken on.
      action: ``float32[4 + n]`` sent (the sticks, then one value per pad button; clamped to [-1, 1]), or None
        when nothing was sent.
      next_step: the step that followed.
      metrics: the actor's (novelty, ...) and whatever earlier observers added (losses, ...).
      index: agent steps taken in this run, this one included.
    """

    step: Step
    action: np.ndarray | None
    next_step: Step
    metrics: dict[str, float]
    index: int


@dataclass
class RunStats:
    """Figures from one run of the loop; the env's own figures are in ``env``."""

    steps: int = 0
    episodes: int = 0
    seconds: float = 0.0
    stopped_by: str = "steps"
    env: dict[str, Any] = field(default_factory=dict)

    @property
    def hz(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        return {"steps": self.steps, "episodes": self.episodes, "seconds": round(self.seconds, 3),
                "hz": round(self.hz, 2), "stopped_by": self.stopped_by, **self.env}


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


class Driver:
    """Runs ``actor`` on ``env`` and hands every transition to the observers.

    Args:
      env: frames in, actions out.
      actor: picks actions; takes in what followed.
      controls: stop and pause switches (hotkeys, signals); one is made if None.
      hold: ``hold()`` True pauses acting (the game window is not in front): the env idles.
    """

    def __init__(self, env: Env, actor: Actor, controls: Controls | None = None,
                 hold: Callable[[], bool] | None = None):
        self.env = env
        self.actor = actor
        self.controls = controls or Controls()
        self.hold = hold
        self._before_act: list[Callable[[], None]] = []
        self._on_step: list[Callable[[Transition], None]] = []
        self._on_reset: list[Callable[[Step], None]] = []
        self._on_episode: list[Callable[[int], None]] = []

    def before_act(self, fn: Callable[[], None]) -> None:
        """``fn()`` before each action (install published weights, health checks)."""
        self._before_act.append(fn)

    def on_step(self, fn: Callable[[Transition], None]) -> None:
        """``fn(transition)`` after each step, in registration order."""
        self._on_step.append(fn)

    def on_reset(self, fn: Callable[[Step], None]) -> None:
        """``fn(step)`` with the first step of every episode."""
        self._on_reset.append(fn)

    def on_episode(self, fn: Callable[[int], None]) -> None:
        """``fn(episodes_finished)`` after an episode ended (before the next begins)."""
        self._on_episode.append(fn)

    def _reset(self) -> Step:
        step = self.env.reset()
        for fn in self._on_reset:
            fn(step)
        return step

    def run(self, max_steps: int | None = None, max_seconds: float | None = None) -> RunStats:
        """Run until ``max_steps`` agent steps, ``max_seconds``, a stop request or the end of the env's data."""
        stats = RunStats()
        controls = self.controls
        t0 = time.monotonic()
        with neutral_on_exit(self.env):
            try:
                step = self._reset()
                while True:
                    if max_steps is not None and stats.steps >= max_steps:
                        break
                    if max_seconds is not None and time.monotonic() - t0 >= max_seconds:
                        stats.stopped_by = "time"
                        break
                    if controls.stop.is_set():
                        stats.stopped_by = controls.reason or "stop"
                        break
                    if controls.paused.is_set() or (self.hold is not None and self.hold()):
                        self.env.idle()
                        continue
                    for before in self._before_act:
                        before()
                    raw = self.actor.act(step)
                    action = None
                    if raw is not None:
                        raw = np.asarray(raw, np.float32)
                        if not np.all(np.isfinite(raw)):
                            raise NonFiniteAction(
                                f"the policy produced non-finite stick values {raw.tolist()} at step {stats.steps}: "
                                "the weights have diverged; stopping with the pad neutral")
                        action = clamp(raw)
                    next_step = self.env.step(action)
                    stats.steps += 1
                    metrics = self.actor.observe(step, action, next_step)
                    transition = Transition(step, action, next_step, dict(metrics), stats.steps)
                    for observe in self._on_step:
                        observe(transition)
                    step = next_step
                    if step.last:
                        stats.episodes += 1
                        for on_episode in self._on_episode:
                            on_episode(stats.episodes)
                        step = self._reset()
            except EndOfData:
                stats.stopped_by = "end of data"
            finally:
                stats.seconds = time.monotonic() - t0
                stats.env = self.env.stats()
        return stats
