"""Fakes of the two ends, for tests, docs and users: a screen serving known
frames, a pad that records every call, and a synchronous env made of the two."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from explorer.core import NEUTRAL, Step, clamp
from explorer.envs.ring import FrameRing


class FakeScreen:
    """Serves frames from a list (cycled) or from a function of the grab count.

    Args:
      frames: ``uint8[H, W, C]`` frames served in order, cycling; or None with ``make``.
      make: ``make(i) -> uint8[H, W, C]`` for the i-th grab.
      shape: frame shape when ``make`` is given.
    """

    def __init__(self, frames: Sequence[np.ndarray] | None = None,
                 make: Callable[[int], np.ndarray] | None = None,
                 shape: tuple[int, int, int] | None = None):
        if frames is None and make is None:
            raise ValueError("FakeScreen needs frames or make")
        self._frames = [np.asarray(f, np.uint8) for f in frames] if frames is not None else None
        self._make = make
        if self._frames is not None:
            self.shape = tuple(self._frames[0].shape)
        else:
            if shape is None:
                raise ValueError("FakeScreen(make=...) needs shape")
            self.shape = tuple(shape)
        self.grabs = 0
        self.closed = False

    @classmethod
    def counting(cls, shape: tuple[int, int, int] = (64, 64, 1)) -> FakeScreen:
        """Frame i is filled with ``i % 256`` (so frames can be told apart and ordered)."""
        return cls(make=lambda i: np.full(shape, i % 256, np.uint8), shape=shape)

    def grab(self) -> np.ndarray:
        i = self.grabs
        self.grabs += 1
        if self._frames is not None:
            return self._frames[i % len(self._frames)]
        assert self._make is not None
        return np.asarray(self._make(i), np.uint8)

    def close(self) -> None:
        self.closed = True


class RecordingPad:
    """Records every call: ``calls`` holds ``("send", action)``, ``("neutral", None)``, ``("close", None)``.

    ``state`` is what the sticks and buttons are at now (float32[4 + n]). With ``log``,
    each call is also appended to that text file as it happens (one line: the call
    and the values), so a test can read what a killed process did last.
    """

    def __init__(self, log: str | None = None) -> None:
        self.calls: list[tuple[str, np.ndarray | None]] = []
        self.times: list[float] = []
        self.state = NEUTRAL.copy()
        self._lock = threading.Lock()
        self._log = open(log, "a", buffering=1, encoding="utf-8") if log else None  # noqa: SIM115

    def _record(self, kind: str, action: np.ndarray | None) -> None:
        with self._lock:
            self.calls.append((kind, action))
            self.times.append(time.monotonic())
            if kind != "close":
                self.state = np.zeros_like(self.state) if action is None else action
            if self._log is not None:
                values = " ".join(f"{v:.4f}" for v in self.state)
                self._log.write(f"{kind} {values}\n")

    def send(self, action: np.ndarray) -> None:
        self._record("send", clamp(action))

    def neutral(self) -> None:
        self._record("neutral", None)

    def close(self) -> None:
        self.neutral()
        self._record("close", None)

    @property
    def sent(self) -> list[np.ndarray]:
        """The actions sent, in order."""
        return [a for kind, a in self.calls if kind == "send" and a is not None]

    @property
    def is_neutral(self) -> bool:
        return bool(np.all(self.state == 0.0))


class FakeEnv:
    """A synchronous :class:`~explorer.core.Env` on a fake screen, as the built-in game is on the engine.

    Each step sends the action to ``pad`` and serves the screen's next frame; an episode
    ends after ``episode_steps`` steps, and the next one starts on the frame the last one
    ended on. ``info["position"]`` is ``(step, 0)`` of the whole run, for coverage code.

    Args:
      screen: frames (default: :meth:`FakeScreen.counting` of ``shape``).
      pad: where actions go (default: a :class:`RecordingPad`).
      stack: frames per observation ``k``.
      episode_steps: steps per episode.
    """

    def __init__(self, screen: FakeScreen | None = None, pad: RecordingPad | None = None, stack: int = 3,
                 episode_steps: int = 1000, shape: tuple[int, int, int] = (16, 16, 1), ring_capacity: int = 8):
        self.screen = screen or FakeScreen.counting(shape)
        self.pad = pad or RecordingPad()
        self.stack = stack
        self.episode_steps = episode_steps
        self.frame_shape = tuple(self.screen.shape)
        self.ring = FrameRing(ring_capacity, self.frame_shape)
        self.frame = self.screen.grab()
        self.steps = 0
        self.episodes_started = 0
        self.closed = False

    def _step(self, first: bool = False, last: bool = False) -> Step:
        return Step(self.ring.latest(self.stack), first=first, last=last, t=time.monotonic(),
                    info={"position": _Position(float(self.steps), 0.0)})

    def reset(self) -> Step:
        self.episodes_started += 1
        self.ring.reset()
        self.ring.push(self.frame)
        return self._step(first=True)

    def step(self, action: np.ndarray | None) -> Step:
        if action is not None:
            self.pad.send(action)
        self.frame = self.screen.grab()
        self.ring.push(self.frame)
        self.steps += 1
        return self._step(last=self.steps % self.episode_steps == 0)

    def idle(self) -> None:
        self.pad.neutral()

    def neutral(self) -> None:
        self.pad.neutral()

    def stats(self) -> dict[str, Any]:
        return {"episodes_started": self.episodes_started}

    def close(self) -> None:
        self.pad.close()
        self.closed = True


class _Position:
    def __init__(self, x: float, y: float):
        self.x, self.y = x, y
