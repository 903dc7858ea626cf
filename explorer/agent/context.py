"""The context input: what the policy and critics know beyond their frames.

Computed here and nowhere else, from what every mode has: the previous action,
the agent step within the episode, and the novelty the agent scored. So a
checkpoint sees the same input in explore, play and replay.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from explorer.core import N_AXES

#: recent-novelty averages in the context, per agent step (~5 and ~20 steps)
EMA_RATES = np.array([0.8, 0.95], np.float32)


class Context:
    """Previous action, episode-step fraction and two recent-novelty averages: ``float32[dim]``.

    The step fraction is ``min(episode_step / horizon, 1)`` with ``horizon`` the agent steps of
    an episode of the built-in game (``game.episode_steps``), in every mode: a live game has no
    episode length of its own, and the fraction must mean the same thing wherever a checkpoint
    goes. The novelty averages tell a feed-forward critic whether the episode has lately been
    going somewhere new. With ``enabled`` false the context is a single constant 0.

    Args:
      enabled: ``learner.context``.
      horizon: agent steps the step fraction counts to.
      action_dim: width of an action (the four sticks and the policy's buttons).
    """

    def __init__(self, enabled: bool, horizon: int, action_dim: int = N_AXES):
        self.enabled = enabled
        self.horizon = int(horizon)
        self.action_dim = int(action_dim)
        self.dim = self.action_dim + 3 if enabled else 1
        self.reset()

    def reset(self) -> None:
        """A new episode."""
        self.prev_action = np.zeros(self.action_dim, np.float32)
        self.episode_step = 0
        self.novelty_ema = np.ones(2, np.float32)

    def value(self) -> np.ndarray:
        """The context now: ``float32[dim]``."""
        if not self.enabled:
            return np.zeros(1, np.float32)
        frac = min(self.episode_step / self.horizon, 1.0) if self.horizon else 0.0
        return np.concatenate([self.prev_action, [frac], self.novelty_ema]).astype(np.float32)

    def advance(self, action: np.ndarray, novelty: float) -> None:
        """``action`` was taken and scored ``novelty``: one agent step on."""
        self.novelty_ema = (EMA_RATES * self.novelty_ema + (1 - EMA_RATES) * novelty).astype(np.float32)
        self.prev_action = np.asarray(action, np.float32)
        self.episode_step += 1

    def state(self) -> dict[str, Any]:
        return {"prev_action": self.prev_action.tolist(), "episode_step": self.episode_step,
                "novelty_ema": self.novelty_ema.tolist()}

    def load(self, state: dict[str, Any]) -> None:
        self.prev_action = np.array(state["prev_action"], np.float32)
        self.episode_step = int(state["episode_step"])
        self.novelty_ema = np.array(state["novelty_ema"], np.float32)
