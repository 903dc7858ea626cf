"""Held buttons sent as taps (``pad.tap_gap``), for the actors.

Beside :mod:`explorer.core`, whose action layout it works in, below ``envs`` and ``agent``.
"""

from __future__ import annotations

import numpy as np

from explorer.core import N_AXES, TRIGGERS


class Taps:
    """Held buttons sent as taps (``pad.tap_gap``): after each press a button is released for ``gap``
    steps, however long the actor holds it, so a game that acts on a fresh press (Doom's USE, most
    games' jump) sees a new press every ``gap + 1`` steps of a held button. With ``gap`` 0 buttons
    are sent as held. Triggers are pulled, never tapped.

    Call it on every action an actor sends, after :func:`~explorer.core.settle`; :meth:`reset` at each episode start.
    """

    def __init__(self, buttons: tuple[str, ...], gap: int):
        self.gap = int(gap)
        self.index = np.array([N_AXES + i for i, b in enumerate(buttons) if b not in TRIGGERS and gap > 0], np.int64)
        self.wait = np.zeros(len(self.index), np.int64)  # steps each button must stay released before its next press

    def __call__(self, action: np.ndarray) -> np.ndarray:
        """``action`` (settled: buttons 1 or -1) with every button inside its gap released, in place."""
        if len(self.index):
            press = (action[self.index] > 0) & (self.wait == 0)
            action[self.index] = np.where(press, 1.0, -1.0)
            self.wait = np.where(press, self.gap, np.maximum(self.wait - 1, 0))
        return action

    def reset(self) -> None:
        self.wait[:] = 0
