"""Recorded sessions replayed as an :class:`~explorer.core.Env`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from explorer.core import EndOfData, Step
from explorer.envs.ring import FrameRing
from explorer.envs.sessions.format import RecordedStep, SessionError, remap_actions
from explorer.envs.sessions.reader import Session


class SessionEnv:
    """Recorded sessions as an :class:`~explorer.core.Env`: their frames in order, through a frame ring.

    Actions sent to it are ignored; each step's ``info`` holds what was recorded for the frame
    the step returns: ``action`` (``float32[4 + n]`` in the layout of ``buttons``, see
    :func:`remap_actions`; NaN where unknown), ``reward``, and the
    decision flags ``starts`` (the action is a new decision) and ``ends`` (the decision ends
    with this step: the next step starts a new one, or the episode ends), ``index`` (the step's
    number in its session) and ``session`` (its path). An episode ends at a
    ``last`` step, or where a session stops before one (a crash): that step is given as last.
    After the final episode :meth:`reset` raises :class:`EndOfData`.

    Args:
      sessions: the sessions, one frame shape.
      stack: frames per observation ``k``.
      ring_capacity: frames the ring holds (more than ``stack``).
      buttons: the pad buttons of the actions it gives (``pad.buttons``).
    """

    def __init__(self, sessions: Sequence[Session], stack: int, ring_capacity: int, buttons: tuple[str, ...] = ()):
        shapes = {s.frame_shape for s in sessions if s.frame_shape is not None}
        if len(shapes) > 1:
            raise SessionError(f"sessions of different frame shapes {sorted(shapes)} cannot be replayed together")
        if not shapes:
            raise SessionError(f"no frames in {', '.join(str(s.path) for s in sessions)}")
        self.sessions = list(sessions)
        self.stack = stack
        self.buttons = tuple(buttons)
        self.frame_shape: tuple[int, int, int] = tuple(shapes.pop())  # type: ignore[assignment]
        self.ring = FrameRing(ring_capacity, self.frame_shape)
        self.steps = 0
        self._rows = self._iter_rows()
        self._next: tuple[np.ndarray, RecordedStep, bool, str] | None = next(self._rows, None)

    def _iter_rows(self) -> Iterator[tuple[np.ndarray, RecordedStep, bool, str]]:
        """``(frame, recorded step, ends an episode, session path)`` in order, over every session."""
        for s in self.sessions:
            where = str(s.path)
            prev: tuple[np.ndarray, RecordedStep] | None = None
            for frames, arrays in s.iter_chunks():
                actions = remap_actions(arrays.action, s.buttons, self.buttons)
                for j in range(len(arrays)):
                    row = RecordedStep(int(arrays.index[j]), float(arrays.t[j]), actions[j], float(arrays.reward[j]),
                               bool(arrays.first[j]), bool(arrays.last[j]), bool(arrays.decision[j]))
                    if prev is not None:
                        yield prev[0], prev[1], prev[1].last or row.first, where
                    prev = (frames[j], row)
            if prev is not None:
                yield prev[0], prev[1], True, where

    def _take(self) -> tuple[np.ndarray, RecordedStep, bool, str]:
        if self._next is None:
            raise EndOfData("the sessions are replayed to their end")
        row, self._next = self._next, next(self._rows, None)
        return row

    def _step(self, row: tuple[np.ndarray, RecordedStep, bool, str], first: bool) -> Step:
        frame, rec, ends_episode, session = row
        self.ring.push(frame)
        nxt = self._next
        ends_decision = ends_episode or nxt is None or nxt[1].decision
        return Step(self.ring.latest(self.stack), first=first, last=ends_episode and not first, t=rec.t,
                       info={"action": rec.action, "reward": rec.reward, "starts": rec.decision,
                             "ends": ends_decision, "index": rec.index, "session": session})

    def reset(self) -> Step:
        """The next episode's first frame (an episode of one frame is skipped: it has no transition)."""
        while True:
            row = self._take()
            if not row[2]:
                self.ring.reset()
                return self._step(row, first=True)

    def step(self, action: np.ndarray | None) -> Step:
        self.steps += 1
        return self._step(self._take(), first=False)

    def idle(self) -> None:
        pass

    def neutral(self) -> None:
        pass

    def stats(self) -> dict[str, Any]:
        return {"sessions": [str(s.path) for s in self.sessions]}

    def close(self) -> None:
        pass
