"""The built-in game as an :class:`~explorer.core.Env`: ViZDoom, one engine step per agent step.

Synchronous: :meth:`DoomEnv.step` sends the sticks and buttons to the pad bridge, runs
``game.frame_skip`` tics and pushes the new frame into the frame ring, as fast
as the engine runs. Each step's ``info["position"]`` is where the player is, for
measurement only (coverage); agents never see it.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from explorer.core import Step
from explorer.envs.doom.game import DoomGame, DoomPad
from explorer.envs.ring import FrameRing


class DoomEnv:
    """A :class:`DoomGame` in synchronous mode, with its pad bridge and a frame ring.

    Args:
      game: the engine (synchronous mode).
      stack: frames per observation ``k``.
      ring_capacity: frames the ring holds (more than ``stack``).
      buttons: the pad buttons of an action, after its four sticks (``pad.buttons``).
    """

    def __init__(self, game: DoomGame, stack: int, ring_capacity: int, buttons: tuple[str, ...] = ()):
        self.game = game
        self.pad = DoomPad(game, buttons)
        self.stack = stack
        self.frame_shape = game.shape
        self.ring = FrameRing(ring_capacity, game.shape)
        self._started = False
        self.cell = 64.0  # coverage cell size, map units
        # agent steps an episode may last: the engine's timeout is game.episode_steps steps of frame_skip tics
        self.episode_budget = game.config.episode_steps

    def _step(self, first: bool = False, last: bool = False) -> Step:
        # A timeout is game.episode_steps running out: the budget the context counts down, not a truncation.
        return Step(self.ring.latest(self.stack), first=first, last=last, t=time.monotonic(),
                    info={"position": self.game.position()})

    def seed(self, seed: int) -> None:
        """The next :meth:`reset` starts a new episode with this engine seed (the first one included)."""
        self.game.game.set_seed(int(seed) % 2**32)
        self._started = True

    def reset(self) -> Step:
        if self._started:
            self.game.new_episode()
        self._started = True
        self.ring.reset()
        self.ring.push(self.game.grab())
        return self._step(first=True)

    def step(self, action: np.ndarray | None) -> Step:
        if action is not None:
            self.pad.send(action)
        self.game.advance()
        self.ring.push(self.game.grab())
        return self._step(last=self.game.episode_ended)

    @property
    def outcome(self) -> str | None:
        """How the episode that just ended ended: ``"goal"``, ``"death"`` or ``"timeout"``."""
        return self.game.outcome

    def idle(self) -> None:
        self.pad.neutral()
        time.sleep(0.05)

    def neutral(self) -> None:
        self.pad.neutral()

    def stats(self) -> dict[str, Any]:
        return {"episodes_started": self.game.episode + 1}

    def close(self) -> None:
        try:
            self.pad.close()
        finally:
            self.game.close()
