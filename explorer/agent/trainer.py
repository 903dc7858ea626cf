"""Trainers: who runs the learner's updates, and when (the :class:`~explorer.agent.schedule.UpdateSchedule`).

Every mode hands the driver a :class:`Trainer`. The acting thread calls
:meth:`Trainer.before_act` before each decision (a trainer that trains elsewhere
installs its newest weights there, and raises if its thread died) and
:meth:`Trainer.after_step` after each agent step, with the agent steps so far;
what that returns joins the step's metrics. The trainers:

- :class:`InlineTrainer`: the updates due, on the acting thread (explore, replay).
- :class:`~explorer.agent.threaded.LockstepLearner`: the updates due, on a thread of its own,
  one step behind the actor (explore with ``learner.schedule.overlap``).
- :class:`~explorer.agent.threaded.ThreadedLearner`: on a thread of its own, as fast as the
  schedule lets it (live mode, optionally only between control ticks: ``learner.live.between_ticks``),
  and the learner of ``explore --workers N`` (:class:`~explorer.run.workers.LearnerService`).
"""

from __future__ import annotations

import time
from typing import Protocol

from explorer.agent.schedule import Due, UpdateSchedule
from explorer.core import Learner


class Trainer(Protocol):
    """What a mode drives a trainer with."""

    @property
    def updates(self) -> int:
        """Updates made (a trainer that resumes a learner may count those before it too)."""
        ...

    def start(self) -> Trainer:
        """Start training (a trainer with a thread starts it); returns the trainer."""
        ...

    def before_act(self) -> None:
        """On the acting thread, before a decision: install the newest weights; raise if training failed."""
        ...

    def after_step(self, steps: int) -> dict[str, float]:
        """On the acting thread, after an agent step (``steps``: agent steps so far, over resumptions):
        make or hand off the updates due; returns the metrics to join the step's."""
        ...

    def stop(self) -> None:
        """Stop training after the update under way (so a checkpoint sees settled weights)."""
        ...

    def stats(self) -> dict[str, float]:
        """At least ``updates``, ``updates_per_s`` (:func:`updates_per_s`) and ``train_seconds``."""
        ...


def updates_per_s(updates: int, first: float | None, last: float) -> float:
    """Updates per second from the start of the first of ``updates`` updates (``first``, monotonic
    seconds; None: none yet) to the end of the last (``last``): the first one's duration is not a gap
    between updates, so it counts ``updates - 1``. 0 until two points in time are known."""
    return (updates - 1) / (last - first) if first is not None and last > first else 0.0


class InlineTrainer:
    """The updates the schedule says are due, each on the acting thread right after its agent step.

    The updates are counted step by step (:class:`~explorer.agent.schedule.Due`): one due while
    replay holds less than a batch is left out, not made up later.

    Args:
      learner: trains from replay.
      schedule: when.
    """

    def __init__(self, learner: Learner, schedule: UpdateSchedule):
        self.learner = learner
        self.schedule = schedule
        self.updates = 0
        self.due = Due(schedule)
        self._first: float | None = None
        self._last = 0.0
        self._train_s = 0.0

    def start(self) -> InlineTrainer:
        return self

    def before_act(self) -> None:
        return None  # trains on the acting thread: its weights are the actor's at once

    def after_step(self, steps: int) -> dict[str, float]:
        due = self.due(steps)
        metrics: dict[str, float] = {}
        for _ in range(due if self.learner.ready() else 0):
            t0 = time.monotonic()
            self._first = t0 if self._first is None else self._first
            metrics = self.learner.step()
            self.updates += 1
            self._last = time.monotonic()
            self._train_s += self._last - t0
        return metrics

    def stop(self) -> None:
        return None  # nothing runs between two steps

    def stats(self) -> dict[str, float]:
        return {"updates": self.updates, "updates_per_s": updates_per_s(self.updates, self._first, self._last),
                "train_seconds": round(self._train_s, 2)}
