"""Fakes of the two ends, for tests, docs and users: a screen serving known
frames and a pad that records every call."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from explorer.pad import NEUTRAL, clamp


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

    ``state`` is what the sticks are at now (float32[4]).
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, np.ndarray | None]] = []
        self.times: list[float] = []
        self.state = NEUTRAL.copy()
        self._lock = threading.Lock()

    def send(self, action: np.ndarray) -> None:
        a = clamp(action)
        with self._lock:
            self.calls.append(("send", a))
            self.times.append(time.monotonic())
            self.state = a

    def neutral(self) -> None:
        with self._lock:
            self.calls.append(("neutral", None))
            self.times.append(time.monotonic())
            self.state = NEUTRAL.copy()

    def close(self) -> None:
        self.neutral()
        with self._lock:
            self.calls.append(("close", None))

    @property
    def sent(self) -> list[np.ndarray]:
        """The actions sent, in order."""
        return [a for kind, a in self.calls if kind == "send" and a is not None]

    @property
    def is_neutral(self) -> bool:
        return bool(np.all(self.state == 0.0))
