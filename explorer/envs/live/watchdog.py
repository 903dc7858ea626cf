"""The watchdog that centres a live pad when the control loop stops sending actions."""

from __future__ import annotations

import threading
import time

from explorer.envs.live.pad import Pad


class Watchdog:
    """Centres the pad when no fresh action arrives within ``timeout_s``.

    The control loop calls :meth:`feed` after every action it sends; a daemon
    thread checks every ``timeout_s / 3`` and calls ``pad.neutral()`` once per
    stall.
    """

    def __init__(self, pad: Pad, timeout_s: float):
        self.pad = pad
        self.timeout_s = float(timeout_s)
        self._last = time.monotonic()
        self._started = self._last
        self._tripped = False
        self.trips = 0
        #: seconds after :meth:`start` of the first trips (at most 100), and the longest time between two feeds
        self.trip_times: list[float] = []
        self.longest_gap_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pad-watchdog", daemon=True)

    def start(self) -> Watchdog:
        self._last = self._started = time.monotonic()
        self._thread.start()
        return self

    def feed(self) -> None:
        now = time.monotonic()
        self.longest_gap_s = max(self.longest_gap_s, now - self._last)
        self._last = now
        self._tripped = False

    def _run(self) -> None:
        period = self.timeout_s / 3
        while not self._stop.wait(period):
            if not self._tripped and time.monotonic() - self._last > self.timeout_s:
                self._tripped = True
                self.trips += 1
                if len(self.trip_times) < 100:
                    self.trip_times.append(round(self._last - self._started, 2))
                self.pad.neutral()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1.0)
