"""When the learner trains: one schedule for every mode.

An :class:`UpdateSchedule` turns the learner section's settings into answers:
whether learning has started (past ``learner.schedule.warmup_steps`` agent steps), how
many updates the update-to-data ratio allows after so many agent steps (one on
each multiple of ``learner.schedule.update_every`` from the warm-up on), how many are due
given the updates done, whether a learner has fallen too far behind
(``learner.schedule.lag_steps``), when to publish weights (``learner.schedule.publish_every``) and
how long an update must at least take (``learner.live.max_updates_per_s``).

The schedule holds no state of its own: its answers are functions of the agent
steps and the updates, the two counts a checkpoint already keeps (the actor's
``steps``, the learner's ``updates``), so a resumed run goes on where it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.config import LearnerConfig
from explorer.core import ExplorerError


@dataclass(frozen=True)
class UpdateSchedule:
    """The learner's update schedule.

    Attributes:
      warmup_steps: agent steps before learning starts.
      update_every: agent steps per update: one update on each multiple of it that is at least
        ``warmup_steps``. None: no ratio, an update is due whenever learning has started (live mode,
        where time, not the agent's steps, bounds the updates).
      lag_steps: agent steps of data the learner may fall behind its ratio before whoever feeds it
        waits (0: never waits).
      publish_every: updates between weight publications.
      max_updates_per_s: cap on updates per second (0: none).
    """

    warmup_steps: int = 0
    update_every: int | None = 1
    lag_steps: int = 0
    publish_every: int = 1
    max_updates_per_s: float = 0.0

    def __post_init__(self) -> None:
        if self.warmup_steps < 0:
            raise ExplorerError(f"an update schedule's warmup_steps must be 0 or more, not {self.warmup_steps}")
        if self.update_every is not None and self.update_every < 1:
            raise ExplorerError(f"an update schedule's update_every must be 1 or more (or None: no ratio), "
                                f"not {self.update_every}")
        if self.lag_steps < 0 or self.publish_every < 1 or self.max_updates_per_s < 0:
            raise ExplorerError(f"an update schedule needs lag_steps >= 0, publish_every >= 1 and "
                                f"max_updates_per_s >= 0, not {self.lag_steps}, {self.publish_every} and "
                                f"{self.max_updates_per_s}")

    @classmethod
    def from_config(cls, config: LearnerConfig, live: bool = False) -> UpdateSchedule:
        """The schedule of the learner section. ``live``: live mode's, with no ratio and with
        ``max_updates_per_s``; otherwise with ``update_every`` and no cap on updates per second."""
        return cls(warmup_steps=config.schedule.warmup_steps, update_every=None if live else config.schedule.update_every,
                   lag_steps=config.schedule.lag_steps, publish_every=config.schedule.publish_every,
                   max_updates_per_s=config.live.max_updates_per_s if live else 0.0)

    def started(self, steps: int) -> bool:
        """Learning has started after ``steps`` agent steps (the warm-up is over)."""
        return steps >= self.warmup_steps

    def allowed(self, steps: int) -> int | None:
        """Updates the ratio allows in all after ``steps`` agent steps: the multiples of ``update_every``
        from ``warmup_steps`` to ``steps`` (0 counts when the warm-up is 0). None: no ratio."""
        every = self.update_every
        if every is None:
            return None
        if not self.started(steps):
            return 0
        return steps // every - (self.warmup_steps - 1) // every

    def due(self, steps: int, updates: int) -> int:
        """Updates due now, after ``steps`` agent steps and ``updates`` updates done: what the ratio allows
        beyond those (0 if they are ahead of it). With no ratio: 1 once learning has started (one now,
        then ask again)."""
        allowed = self.allowed(steps)
        if allowed is None:
            return 1 if self.started(steps) else 0
        return max(0, allowed - updates)

    def behind(self, steps: int, updates: int) -> bool:
        """The learner, with ``updates`` done after ``steps`` agent steps, is more than ``lag_steps`` agent
        steps of data behind its ratio (never with ``lag_steps`` 0, before the warm-up ends or with no ratio)."""
        allowed, every = self.allowed(steps), self.update_every
        if not self.lag_steps or allowed is None or every is None or not self.started(steps):
            return False
        return (allowed - updates) * every > self.lag_steps

    def publishes(self, updates: int) -> bool:
        """The update that brought the count to ``updates`` publishes the weights."""
        return updates % self.publish_every == 0

    @property
    def min_period(self) -> float:
        """Seconds an update takes at least, waiting included (0: no cap)."""
        return 1.0 / self.max_updates_per_s if self.max_updates_per_s > 0 else 0.0


class Due:
    """The updates due step by step, for a trainer that makes them as the agent steps (one call per step).

    ``due(steps)`` is what the schedule allows after ``steps`` agent steps beyond what it allowed at the
    calls before; the first call counts from the step before, so updates due before a trainer's first
    step (a resumed run's, made in the run before) are not asked for again. An update that is due but
    cannot be made (replay not yet filled) is left out, not made up later.
    """

    def __init__(self, schedule: UpdateSchedule):
        self.schedule = schedule
        self.settled: int | None = None  # updates the schedule allowed so far, made or left out

    def __call__(self, steps: int) -> int:
        if self.settled is None:
            self.settled = self.schedule.allowed(steps - 1) or 0
        due = self.schedule.due(steps, self.settled)
        self.settled += due
        return due
