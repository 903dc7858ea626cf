"""Timing shared by the envs and the agent: a fixed tick (:class:`Pacer`) and the windows between ticks
a learner thread trains in (:class:`IdleWindow`).

At the bottom layer, beside :mod:`explorer.core`; imports nothing of explorer.
"""

from __future__ import annotations

import threading
import time


class Pacer:
    """A fixed tick: :meth:`wait` sleeps until the next multiple of ``period`` after :meth:`start`.

    Ticks that were missed (the caller ran late) are skipped, not caught up, and counted in
    ``missed``. ``stop``, when given, cuts a wait short (a stop request).
    """

    def __init__(self, hz: float, stop: threading.Event | None = None):
        if hz <= 0:
            raise ValueError(f"a tick rate must be positive, got {hz} Hz")
        self.period = 1.0 / hz
        self.stop = stop
        self.missed = 0
        self._next = time.monotonic()

    def start(self) -> None:
        self._next = time.monotonic()

    def upcoming(self) -> float:
        """The monotonic time the next :meth:`wait` sleeps until (if the caller is not late by then)."""
        return self._next + self.period

    def wait(self) -> None:
        self._next += self.period
        delay = self._next - time.monotonic()
        if delay > 0:
            if self.stop is not None:
                self.stop.wait(delay)
            else:
                time.sleep(delay)
        else:
            missed = int(-delay / self.period)
            self.missed += missed
            self._next += missed * self.period


class IdleWindow:
    """When the acting thread has nothing to do until a deadline: the time a learner thread can
    train in without delaying an action.

    Live, a tick's work (take the newest frame, score it, decide, send) is on the way from
    screen to pad; an update running at the same time shares the two cores with it and delays
    the action. The acting thread :meth:`open`-s a window after it sent, until its next tick,
    and :meth:`close`-s it when the tick starts; a learner thread :meth:`enter`-s one before
    each update.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._until = 0.0  # the open window's end (monotonic seconds); 0 while closed
        self._opened = 0  # windows opened so far
        self._used = 0  # the last window an entry was granted in

    def open(self, until: float) -> None:
        with self._cond:
            self._until = until
            self._opened += 1
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._until = 0.0

    def enter(self, need: float, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds, for an open window with ``need`` seconds left, or for a
        window nothing entered yet (so work longer than any window still gets one per window).
        True when one was found."""
        def fits() -> bool:
            left = self._until - time.monotonic()
            return left > 0 and (left >= need or self._opened != self._used)

        with self._cond:
            if not self._cond.wait_for(fits, timeout):
                return False
            self._used = self._opened
            return True
