"""Learning beside acting, for real time: the learner trains on a thread of its own.

In live mode the game does not wait, so a training step (tens of
milliseconds) must never sit inside a control tick. :class:`ThreadedLearner`
runs :meth:`Learner.step` on a learner thread as fast as it can (or at most
``learner.max_updates_per_s``); every ``learner.publish_every`` updates it
snapshots the policy's weights, and the acting thread installs the newest
snapshot into its actor between two decisions (:meth:`ThreadedLearner.sync`),
so an action never sees half-updated weights and no lock is held across a
training step.

If the learner thread dies, :meth:`ThreadedLearner.check` raises
:class:`LearnerDied` on the acting thread; the run then ends with the pad
neutral.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from explorer.config import LearnerConfig
from explorer.core import ExplorerError, Learner


class LearnerDied(ExplorerError):
    """The learner thread stopped with an error."""


class ThreadedLearner:
    """Runs ``learner.step()`` on its own thread and publishes weights for an actor.

    Args:
      learner: trains from replay (:class:`explorer.agent.learner.Learner`).
      config: the learner section (``publish_every``, ``max_updates_per_s``).
      ready: whether learning may start (past the actor's warm-up steps, replay filled).
    """

    def __init__(self, learner: Learner, config: LearnerConfig, ready: Callable[[], bool]):
        self.learner = learner
        self.config = config
        self.ready = ready
        self.updates = 0
        self.published = 0
        self.installed = 0
        self.error: BaseException | None = None
        self.metrics: dict[str, float] = {}
        self._snapshot: list[np.ndarray] | None = None
        self._stop = threading.Event()
        self._first_update: float | None = None  # learning starts after the warm-up steps
        self._last_update = 0.0
        self._train_s = 0.0
        self._thread = threading.Thread(target=self._run, name="learner", daemon=True)

    def start(self) -> ThreadedLearner:
        self._thread.start()
        return self

    # ---------------------------------------------------------------- acting thread
    def sync(self, actor: Any) -> None:
        """Install the newest published weights into ``actor`` (``set_weights``); raise if the thread died."""
        self.check()
        snapshot, self._snapshot = self._snapshot, None  # one reference swap: whole snapshots only
        if snapshot is not None:
            actor.set_weights(snapshot)
            self.installed += 1

    def check(self) -> None:
        """Raise :class:`LearnerDied` on the caller's thread if the learner thread failed."""
        if self.error is not None:
            raise LearnerDied(f"the learner thread stopped after {self.updates} updates: "
                              f"{type(self.error).__name__}: {self.error}") from self.error

    def stop(self) -> None:
        """Stop the learner thread after its current step (so a checkpoint sees settled weights)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30.0)

    def stats(self) -> dict[str, float]:
        """Updates, updates/s since learning began (after the warm-up), snapshots published and installed."""
        first = self._first_update
        rate = (self.updates - 1) / (self._last_update - first) if first is not None and self._last_update > first else 0.0
        return {"updates": self.updates, "updates_per_s": rate,
                "train_seconds": round(self._train_s, 2), "published": self.published, "installed": self.installed}

    # ---------------------------------------------------------------- learner thread
    def _run(self) -> None:
        min_period = 1.0 / self.config.max_updates_per_s if self.config.max_updates_per_s > 0 else 0.0
        try:
            while not self._stop.is_set():
                if not (self.ready() and self.learner.ready()):
                    self._stop.wait(0.02)
                    continue
                t0 = time.monotonic()
                if self._first_update is None:
                    self._first_update = t0
                metrics = self.learner.step()
                self.updates += 1
                self._last_update = time.monotonic()
                self._train_s += self._last_update - t0
                if self.updates % self.config.publish_every == 0:
                    self._snapshot = self.learner.get_weights()
                    self.published += 1
                    self.metrics = metrics
                rest = min_period - (time.monotonic() - t0)
                if rest > 0:
                    self._stop.wait(rest)
        except BaseException as err:  # surfaced on the acting thread by check()
            self.error = err
