"""Learning beside acting, for real time: the learner trains on its own thread.

In live mode the game does not wait, so a training step (tens of
milliseconds) must never sit inside a control tick. :class:`ThreadedAgent`
wraps the learning agent: the control thread acts with a copy of the policy and
records transitions (novelty and replay writes, a few milliseconds); a learner
thread samples the replay and trains as fast as it can. Every
``learner.publish_every`` updates the learner thread snapshots the policy's
weights (with a shared encoder, the critic's encoder too) between two steps,
and the control thread installs the newest snapshot before its next action,
so an action never sees half-updated weights and no lock is held across a
training step.

If the learner thread dies, :meth:`ThreadedAgent.check` raises
:class:`LearnerDied` on the control thread; the loop then ends with the pad
neutral.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from explorer.config import LearnerConfig


class LearnerDied(RuntimeError):
    """The learner thread stopped with an error."""


class ThreadedAgent:
    """A learning agent whose training runs on a thread of its own.

    Args:
      agent: a :class:`explorer.agent.learner.LearningAgent`.
      config: the learner section (``publish_every``, ``max_updates_per_s``).
    """

    def __init__(self, agent: Any, config: LearnerConfig):
        self.agent = agent
        self.config = config
        agent.train_inline = False
        self.acting = agent.learner.acting_copy()
        agent.novelty.warm_up()
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
        self._thread.start()

    # ---------------------------------------------------------------- control thread
    def act(self, obs: Any) -> np.ndarray:
        self.check()
        snapshot, self._snapshot = self._snapshot, None  # one reference swap: whole snapshots only
        if snapshot is not None:
            self.acting.set_weights(snapshot)
            self.installed += 1
        return self.agent.act(obs)

    def observe(self, obs: Any, action: Any, next_obs: Any, first: bool, last: bool) -> dict[str, float]:
        out = self.agent.observe(obs, action, next_obs, first, last)
        return {**out, **self.metrics} if self.metrics else out

    def check(self) -> None:
        """Raise :class:`LearnerDied` on the caller's thread if the learner thread failed."""
        if self.error is not None:
            raise LearnerDied(f"the learner thread stopped after {self.updates} updates: "
                              f"{type(self.error).__name__}: {self.error}") from self.error

    def stop_learning(self) -> None:
        """Stop the learner thread after its current step (so a checkpoint sees settled weights)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30.0)

    def close(self) -> None:
        self.stop_learning()
        self.agent.close()

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
                if not self.agent.ready_to_train():
                    self._stop.wait(0.02)
                    continue
                t0 = time.monotonic()
                if self._first_update is None:
                    self._first_update = t0
                metrics = self.agent.train_once()
                self.updates += 1
                self._last_update = time.monotonic()
                self._train_s += self._last_update - t0
                if self.updates % self.config.publish_every == 0:
                    self._snapshot = [w.numpy() for w in self.agent.learner.policy_net.weights]
                    self.published += 1
                    self.metrics = metrics
                rest = min_period - (time.monotonic() - t0)
                if rest > 0:
                    self._stop.wait(rest)
        except BaseException as err:  # surfaced on the control thread by check()
            self.error = err
