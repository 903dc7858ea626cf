"""Learning beside acting, for real time: the learner trains on a thread of its own.

In live mode the game does not wait, so a training step (tens of
milliseconds) must never sit inside a control tick. :class:`ThreadedLearner`
runs :meth:`Learner.step` on a learner thread, in the gaps between control
ticks (an :class:`~explorer.timing.IdleWindow`; ``learner.live.between_ticks``) or as
fast as it can, at most ``learner.live.max_updates_per_s``; every ``learner.schedule.publish_every`` updates it
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

from explorer.agent.schedule import Due, UpdateSchedule
from explorer.agent.trainer import updates_per_s
from explorer.core import ExplorerError, Learner
from explorer.timing import IdleWindow

#: live mode: transitions and frames the control thread may add while one batch is drawn and copied (a copy
#: takes milliseconds, a tick tens); their slots are left out, and the frames are copied outside the lock
LIVE_MARGIN = (4, 64)


#: an update enters a wait between ticks only if this share of its recent duration is left of it. Measured on the
#: 2-core test bed (docs/experiments.md): 1.2 (never into the next tick) gave one update per tick, 29.9 updates/s,
#: p99 22 ms; 0.8 gave 33.5 updates/s, p99 25 ms; 0.5 gave 41 updates/s, p99 28 ms and a watchdog trip
UPDATE_MARGIN = 0.8


class LearnerDied(ExplorerError):
    """The learner thread stopped with an error."""


class ThreadedLearner:
    """Runs ``learner.step()`` on its own thread whenever the schedule has an update due, and publishes weights.

    A :class:`~explorer.agent.trainer.Trainer`: live mode's learner, and the learner of
    ``explore --workers N``.

    Args:
      learner: trains from replay (:class:`explorer.agent.learner.Learner`).
      schedule: when (``UpdateSchedule.from_config(config, live=True)`` in live mode: as soon as
        learning has started, at most ``max_updates_per_s``; publishing every ``publish_every`` updates).
      steps: the agent steps so far (the schedule's warm-up and ratio count them).
      actor: the actor to install the published weights into (:meth:`before_act`), if any.
      window: when given, an update starts only inside it: while the acting thread waits for its
        next tick, and only if most of the update (:data:`UPDATE_MARGIN` of its recent duration)
        fits in what is left of the wait, or if it is the first in this wait. So training fills
        the gaps between ticks instead of delaying actions.
      margin: ``(transitions, frames)`` others may add to replay while a batch is drawn (:data:`LIVE_MARGIN`).
      done: updates the learner made before (a resumed learner's): the schedule counts them, and so
        does :attr:`updates`; :meth:`stats`' rate counts only this trainer's.
      weights: what to publish (default ``learner.get_weights()``).
      on_publish: gets each publication; by default it is kept for :meth:`sync`.
      on_update: gets each update's metrics.
    """

    def __init__(self, learner: Learner, schedule: UpdateSchedule, steps: Callable[[], int], actor: Any = None,
                 window: IdleWindow | None = None, margin: tuple[int, int] = LIVE_MARGIN, done: int = 0,
                 weights: Callable[[], Any] | None = None, on_publish: Callable[[Any], None] | None = None,
                 on_update: Callable[[dict[str, float]], None] | None = None):
        self.learner = learner
        self.schedule = schedule
        self.steps = steps
        self.actor = actor
        self.window = window
        self.margin = margin
        self.done = done
        self.weights = weights or learner.get_weights
        self.on_publish = on_publish
        self.on_update = on_update
        self.update_s = 0.0  # recent duration of one update (moving average), seconds
        self.updates = done
        self.published = 0
        self.installed = 0
        self.error: BaseException | None = None
        self.metrics: dict[str, float] = {}
        #: held during each update: whoever must see settled weights between two updates takes it
        self.lock = threading.Lock()
        self._snapshot: Any = None
        self._stop = threading.Event()
        self._wake = threading.Condition()
        self._first_update: float | None = None  # learning starts after the warm-up steps
        self._last_update = 0.0
        self.train_s = 0.0
        self._thread = threading.Thread(target=self._run, name="learner", daemon=True)

    def start(self) -> ThreadedLearner:
        self._thread.start()
        return self

    # ---------------------------------------------------------------- acting thread
    def before_act(self) -> None:
        """Install the newest published weights into the actor, if there is one; raise if the thread died."""
        if self.actor is not None:
            self.sync(self.actor)
        else:
            self.check()

    def after_step(self, steps: int) -> dict[str, float]:
        """The metrics of the update published last (the steps are read with ``steps()``)."""
        return self.metrics

    def wake(self) -> None:
        """Data came in: look at the schedule now rather than after the current wait."""
        with self._wake:
            self._wake.notify_all()

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
        self.wake()
        if self._thread.is_alive():
            self._thread.join(timeout=60.0)

    def stats(self) -> dict[str, float]:
        """Updates, updates/s since learning began (after the warm-up), snapshots published and installed."""
        made = self.updates - self.done
        return {"updates": made, "updates_per_s": updates_per_s(made, self._first_update, self._last_update),
                "train_seconds": round(self.train_s, 2), "published": self.published, "installed": self.installed}

    # ---------------------------------------------------------------- learner thread
    def _run(self) -> None:
        schedule = self.schedule
        try:
            while not self._stop.is_set():
                if not (schedule.due(self.steps(), self.updates) and self.learner.ready()):
                    with self._wake:
                        if not self._stop.is_set():
                            self._wake.wait(0.02)
                    continue
                if self.window is not None and not self.window.enter(UPDATE_MARGIN * self.update_s, timeout=0.1):
                    continue
                with self.lock:
                    t0 = time.monotonic()
                    if self._first_update is None:
                        self._first_update = t0
                    metrics = self.learner.step(margin=self.margin)
                    self.updates += 1
                    self._last_update = time.monotonic()
                took = self._last_update - t0
                self.train_s += took
                self.update_s = took if self.updates == self.done + 1 else 0.9 * self.update_s + 0.1 * took
                if self.on_update is not None:
                    self.on_update(metrics)
                if schedule.publishes(self.updates):
                    snapshot = self.weights()
                    if self.on_publish is not None:
                        self.on_publish(snapshot)
                    else:
                        self._snapshot = snapshot
                    self.published += 1
                    self.metrics = metrics
                rest = schedule.min_period - (time.monotonic() - t0)
                if rest > 0:
                    self._stop.wait(rest)
        except BaseException as err:  # surfaced on the acting thread by check()
            self.error = err


class LockstepLearner:
    """One update per agent step, on a thread of its own, one step behind the actor (explore).

    The built-in game waits for the agent, so explore could alternate acting and
    learning on one core; this overlaps them instead. After the actor's step ``t``
    the update for ``t`` is :meth:`submit`-ted; it runs while the actor takes step
    ``t + 1``, and before step ``t + 2`` the actor installs the weights it produced
    (:meth:`sync`). So the actor acts with weights one update older than when
    training inline, and the run stays repeatable: each update samples the replay
    as it was at its step (:meth:`Replay.mark`), whatever the actor added since,
    and the actor always installs the weights of the same update.

    A :class:`~explorer.agent.trainer.Trainer`: :meth:`after_step` submits the updates the schedule
    has due at that step (:class:`~explorer.agent.schedule.Due`), :meth:`before_act` is :meth:`sync`.

    Args:
      learner: trains from replay.
      actor: acts with its own copy of the policy (``set_weights``).
      margin: ``(transitions, frames)`` the actor adds at most during one step.
      schedule: when.
    """

    def __init__(self, learner: Any, actor: Any, margin: tuple[int, int], schedule: UpdateSchedule):
        self.learner = learner
        self.actor = actor
        self.margin = margin
        self.schedule = schedule
        self.due = Due(schedule)
        self._first_update: float | None = None
        self._last_update = 0.0
        self.train_s = 0.0
        self.submitted = 0
        self.done = 0
        self.installed = 0  # the update whose weights the actor acts with (0: the initial ones)
        #: the metrics of the update whose weights were installed last (taken by the next step's observers)
        self.metrics: dict[str, float] = {}
        self.error: BaseException | None = None
        self._weights: dict[int, tuple[list[np.ndarray], dict[str, float]]] = {}
        self._cond = threading.Condition()
        self._queue: list[tuple[int, tuple[int, int]]] = []
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="learner", daemon=True)

    @property
    def updates(self) -> int:
        return self.done

    def start(self) -> LockstepLearner:
        self._thread.start()
        return self

    def before_act(self) -> None:
        self.sync()

    def after_step(self, steps: int) -> dict[str, float]:
        """Submit the updates due after ``steps`` agent steps; returns the metrics of the update whose
        weights were installed since the step before (once)."""
        metrics, self.metrics = self.metrics, {}
        due = self.due(steps)
        for _ in range(due if self.learner.ready() else 0):
            self.submit()
        return metrics

    def stop(self) -> None:
        self.close()

    def stats(self) -> dict[str, float]:
        return {"updates": self.done, "updates_per_s": updates_per_s(self.done, self._first_update, self._last_update),
                "train_seconds": round(self.train_s, 2)}

    def submit(self) -> None:
        """Queue one update on the replay as it is now."""
        self.check()
        at = self.learner.replay.mark()
        with self._cond:
            self.submitted += 1
            self._queue.append((self.submitted, at))
            self._cond.notify_all()

    def sync(self) -> None:
        """Before an action: wait for all but the newest submitted update, and act with its weights."""
        want = self.submitted - 1
        if want <= self.installed:
            self.check()
            return
        with self._cond:
            self._cond.wait_for(lambda: self.done >= want or self.error is not None)
            published = self._weights.pop(want, None)
            for v in [v for v in self._weights if v < want]:
                del self._weights[v]
        self.check()
        assert published is not None
        self._install(want, published)

    def _install(self, version: int, published: tuple[list[np.ndarray], dict[str, float]]) -> None:
        weights, metrics = published
        self.actor.set_weights(weights)
        self.installed = version
        self.metrics = metrics

    def drain(self) -> None:
        """Wait until every submitted update is done (before a checkpoint), and act with the newest weights."""
        with self._cond:
            self._cond.wait_for(lambda: self.done >= self.submitted or self.error is not None)
            published = self._weights.pop(self.submitted, None)
            self._weights.clear()
        self.check()
        if published is not None:
            self._install(self.submitted, published)

    def check(self) -> None:
        if self.error is not None:
            raise LearnerDied(f"the learner thread stopped after {self.done} updates: "
                              f"{type(self.error).__name__}: {self.error}") from self.error

    def close(self) -> None:
        """Finish the updates submitted, then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=60.0)

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._queue or self._closed)
                    if not self._queue:
                        return
                    version, at = self._queue.pop(0)
                t0 = time.monotonic()
                if self._first_update is None:
                    self._first_update = t0
                metrics = self.learner.step(at, self.margin)
                self._last_update = time.monotonic()
                self.train_s += self._last_update - t0
                weights = self.learner.get_weights()
                with self._cond:
                    self._weights[version] = (weights, metrics)
                    self.done = version
                    self._cond.notify_all()
        except BaseException as err:  # surfaced on the acting thread by check()
            with self._cond:
                self.error = err
                self._cond.notify_all()
