"""Observers: what the modes attach to the driver (training, coverage, logging, recording).

Each is a small object; ``attach(driver)`` registers its callbacks, or the
object itself is the ``on_step`` callback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from explorer.agent.trainer import Trainer
from explorer.config import Config
from explorer.core import Step, action_stats
from explorer.run.coverage import MAP_CELLS
from explorer.run.coverage import Coverage as CellCoverage
from explorer.run.driver import Driver, Transition
from explorer.run.rundir import RunDir


class Training:
    """Drives a :class:`~explorer.agent.trainer.Trainer` from the driver: ``before_act`` before each
    decision, ``after_step`` after each agent step with the agent steps so far (``steps()``, the
    actor's count over resumptions); what that returns joins the transition's metrics, for the
    observers after it."""

    def __init__(self, trainer: Trainer, steps: Callable[[], int]):
        self.trainer = trainer
        self.steps = steps

    def attach(self, driver: Driver) -> None:
        driver.before_act(self.trainer.before_act)
        driver.on_step(self.step)

    def step(self, t: Transition) -> None:
        """After an agent step (the ``on_step`` callback :meth:`attach` registers)."""
        t.metrics.update(self.trainer.after_step(self.steps()))


class Coverage:
    """Map cells visited per episode, from a position ``where(step) -> (x, y)`` (measurement only), and
    each episode's agent steps.

    Args:
      where: the player's position in a step (``step.info["position"]`` for the built-in game): ``x``, ``y``
        and optionally ``room`` and ``z``; or a frame cell (``key``, bytes) from a game without positions.
      every: add a position every this many steps (1: every step).
      cell: the cell size, in the position's units.
      outcome: how the episode that just ended ended (the env's ``outcome``), for the coverage figure.
    """

    def __init__(self, where: Callable[[Step], Any], every: int = 1, cell: float = 64.0,
                 outcome: Callable[[], str | None] | None = None):
        self.where = where
        self.outcome = outcome
        self.every = every
        self.visited = CellCoverage(cell)  # the cells and path visited, per episode and over the run

    def _add(self, step: Step) -> None:
        self.visited.add_place(self.where(step))

    def attach(self, driver: Driver) -> None:
        driver.on_reset(self._add)
        driver.on_step(self._step)
        driver.on_episode(self._end_episode)

    def _step(self, t: Transition) -> None:
        self.visited.episode_steps += 1
        if t.index % self.every == 0:
            self._add(t.next_step)

    def _end_episode(self, episodes: int) -> None:
        self.visited.end_episode(self.outcome() if self.outcome is not None else None)


class MetricsLog:
    """Means of the step metrics and action statistics every ``every`` steps, and each episode's cells,
    to ``metrics.jsonl`` and TensorBoard.

    Args:
      run: the run directory.
      every: agent steps between lines.
      done: agent steps so far (over resumptions).
      coverage: cells per episode, when the env reports positions.
      budget: the agent steps an episode may last (the env's ``episode_budget``), for the coverage figure.
      buttons: the pad buttons of the actions (``pad.buttons``), for their press rates.
    """

    def __init__(self, run: RunDir, every: int, done: Callable[[], int], coverage: Coverage | None = None,
                 episode_info: Callable[[], dict[str, Any]] | None = None, buttons: tuple[str, ...] = (),
                 budget: int | None = None):
        if coverage is not None and budget is None:
            raise ValueError("MetricsLog: the coverage figure needs the episode budget (the env's episode_budget)")
        self.run = run
        self.budget = budget
        self.buttons = buttons
        self.every = every
        self.done = done
        self.coverage = coverage
        self.episode_info = episode_info
        self.window: dict[str, list[float]] = {}
        self.actions: list[np.ndarray] = []

    def attach(self, driver: Driver) -> None:
        driver.on_step(self._step)
        if self.coverage is not None:
            driver.on_episode(self._episode)

    def _step(self, t: Transition) -> None:
        if t.action is not None:
            self.actions.append(t.action)
        for k, v in t.metrics.items():
            self.window.setdefault(k, []).append(float(v))
        step = self.done()
        if step % self.every:
            return
        means = {k: float(np.mean(v)) for k, v in self.window.items()}
        stats: dict[str, float] = {}
        if self.actions:
            stats = action_stats(np.stack(self.actions), self.buttons)
        if self.coverage is not None:
            stats["coverage/distinct_cells"] = len(self.coverage.visited.all_cells)
        self.run.log({"step": step, **means, **stats})
        self.run.scalars(step, {**{f"learner/{k}": v for k, v in means.items()}, **stats})
        self.window.clear()
        self.actions.clear()

    def _episode(self, n: int) -> None:
        assert self.coverage is not None and self.budget is not None
        cov = self.coverage.visited
        cells = cov.per_episode[-1]
        info = self.episode_info() if self.episode_info is not None else {}
        kind = {} if cov.label == MAP_CELLS else {"cells_are": cov.label}  # a game without positions says so
        self.run.log({"step": self.done(), "episode": n, "cells": cells, **kind, **info})
        self.run.scalars(self.done(), {"coverage/cells_per_episode": cells,
                                       "coverage/cells_per_budget": cov.figure(self.budget)})


class BlankWarning:
    """One line on stderr once the captured frames have been uniform for ``after_s``: a black or uniform
    region, a minimised window or a game that grabs black is said at once, before ``capture.blank_seconds``
    of it stops the run. It warns again after the picture has come back and gone again.

    Args:
      capture: the live env's capture thread (its ``blank_for``, seconds).
      after_s: seconds of uniform frames before the warning.
      stop_s: ``capture.blank_seconds``, named in the warning.
      hint: what else to check (the capture backend's known blind spots).
      out: where the line goes.
    """

    def __init__(self, capture: Any, after_s: float, stop_s: float, hint: str = "", out: Any = None):
        self.capture = capture
        self.after_s = after_s
        self.stop_s = stop_s
        self.hint = hint
        self.out = out
        self.warned = False

    def __call__(self, t: Transition) -> None:
        blank_for = self.capture.blank_for
        if not blank_for:
            self.warned = False
        elif blank_for >= self.after_s and not self.warned:
            self.warned = True
            print(f"explorer: warning: the captured frames have been uniform (blank or black) for {blank_for:.1f} s: "
                  f"is the game window visible, not minimised and inside the capture region?"
                  + (f" {self.hint}." if self.hint else "")
                  + f" The run stops if this lasts capture.blank_seconds = {self.stop_s:g} s",
                  file=self.out or sys.stderr, flush=True)


def blank_warning(env: Any, config: Config) -> BlankWarning:
    """The :class:`BlankWarning` of a live env: after a third of ``capture.blank_seconds`` (at most 1 s)."""
    blank_s = config.capture.blank_seconds
    return BlankWarning(env.capture, min(1.0, blank_s / 3), blank_s, getattr(env.screen, "blank_hint", ""))


class SessionRecorder:
    """Records the run as a session: each episode's first frame, then every step's action and frame.

    Writes happen on the recorder's own thread; the step costs a frame copy.
    """

    def __init__(self, path: Path, meta: dict[str, Any], chunk_frames: int, decisions: Callable[[], bool | None],
                 buttons: tuple[str, ...] = ()):
        from explorer.envs.sessions.writer import LoopRecorder, Recorder

        self.path = path
        self.recorder = LoopRecorder(Recorder(path, meta, chunk_frames=chunk_frames, buttons=buttons))
        self.decisions = decisions

    def attach(self, driver: Driver) -> None:
        driver.on_reset(lambda s: self.recorder.begin(s.obs[-1].numpy(), s.t))
        driver.on_step(self._step)

    def _step(self, t: Transition) -> None:
        self.recorder.step(t.action, t.metrics.get("novelty"), t.next_step.obs[-1].numpy(), t.next_step.last,
                           t.next_step.t, decision=self.decisions() if t.action is not None else None)

    @property
    def frames(self) -> int:
        """Frames on disk so far."""
        return int(self.recorder.recorder.committed)

    def close(self) -> dict[str, Any]:
        return self.recorder.close()


def open_recorder(config: Config, run_path: Path, source: str, decisions: Callable[[], bool] | None = None,
                  name: str | None = None, **meta: Any) -> SessionRecorder | None:
    """A :class:`SessionRecorder` writing under ``record.dir`` (None when not recording).

    ``decisions()``: whether the action just taken was a new decision (a learning actor's
    ``started``); None records no decision flags (every step is then a decision). The session is
    ``<record.dir>/<name>``, by default named after the run (a resumed run records a new session).
    """
    if not config.record.dir:
        return None
    path = Path(config.record.dir) / (name or run_path.name)
    info = {"source": source, "run_dir": str(run_path), "config": config.to_dict(),
            "episode_steps": config.game.episode_steps, **meta}
    return SessionRecorder(path, info, config.record.chunk_frames, decisions or (lambda: None), config.pad.buttons)
