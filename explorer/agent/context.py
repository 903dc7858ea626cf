"""The context input: what the policy and critics know beyond their frames.

Computed here and nowhere else, from what every mode has: the previous action,
the agent step within the episode, the novelty the agent scored and, with
``learner.view_strips``, the frames of the episode. So a checkpoint sees the
same input in explore, play and replay.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from explorer.core import N_AXES

#: recent-novelty averages in the context, per agent step (~5 and ~20 steps)
EMA_RATES = np.array([0.8, 0.95], np.float32)


def colour_bins(frame: np.ndarray, bins: int) -> np.ndarray:
    """``int[H, W]``: the joint colour bin of each pixel of ``uint8[H, W, C]``, each channel cut into
    ``bins`` equal ranges (the bins of :func:`explorer.agent.novelty.colour_histogram`)."""
    q = np.minimum(frame.astype(np.int32) * bins // 256, bins - 1)
    weights = bins ** np.arange(frame.shape[-1] - 1, -1, -1)
    return (q * weights).sum(-1)


class ViewRarity:
    """How rare the colours of each vertical strip of the view are in the episode so far.

    The episode's colour distribution is the mean of its frames' colour histograms (with one
    frame's worth of uniform prior). A strip's rarity is the mean of ``-log p`` over its pixels, ``p``
    the episode's share of the pixel's colour bin; the features are each strip's rarity less the
    strips' mean, halved and clipped to [-3, 3]: which way the view shows what the episode has not,
    a memory of the episode a feed-forward policy can steer by.

    Args:
      strips: vertical strips of the view, left to right.
      bins: colour bins per channel.
    """

    def __init__(self, strips: int, bins: int):
        self.strips, self.bins = int(strips), int(bins)
        self.reset()

    def reset(self) -> None:
        self.counts: np.ndarray | None = None  # summed colour histograms of the episode's frames
        self.frames = 0
        self.value = np.zeros(self.strips, np.float32)

    def see(self, frame: np.ndarray) -> None:
        """Score ``uint8[H, W, C]`` against the episode so far, then add it to the episode."""
        idx = colour_bins(np.asarray(frame), self.bins)
        n = self.bins ** np.asarray(frame).shape[-1]
        if self.counts is None:  # the episode's first frame sets the number of colour bins
            self.counts = np.zeros(n, np.float64)
        share = (self.counts + 1.0 / n) / (self.frames + 1.0)
        surprise = -np.log(share)[idx]  # [H, W]
        cols = np.array_split(np.arange(idx.shape[1]), self.strips)
        rarity = np.array([surprise[:, c].mean() for c in cols])
        self.value = np.clip((rarity - rarity.mean()) / 2.0, -3.0, 3.0).astype(np.float32)
        self.counts += np.bincount(idx.ravel(), minlength=n) / idx.size
        self.frames += 1

    def state(self) -> dict[str, Any]:
        return {"counts": None if self.counts is None else self.counts.tolist(), "frames": self.frames,
                "value": self.value.tolist()}

    def load(self, state: dict[str, Any]) -> None:
        self.counts = None if state["counts"] is None else np.array(state["counts"], np.float64)
        self.frames = int(state["frames"])
        self.value = np.array(state["value"], np.float32)


class Context:
    """Previous action, episode-step fraction, two recent-novelty averages and, with ``view_strips``,
    the :class:`ViewRarity` of the newest frame: ``float32[dim]``.

    The step fraction is ``min(episode_step / horizon, 1)`` with ``horizon`` the agent steps of
    an episode of the built-in game (``game.episode_steps``), in every mode: a live game has no
    episode length of its own, and the fraction must mean the same thing wherever a checkpoint
    goes. The novelty averages tell a feed-forward critic whether the episode has lately been
    going somewhere new. With ``enabled`` false the context is a single constant 0.

    Args:
      enabled: ``learner.context``.
      horizon: agent steps the step fraction counts to.
      action_dim: width of an action (the four sticks and the policy's buttons).
      view_strips: ``learner.view_strips`` (0: none).
      bins: colour bins per channel of the view rarity (``novelty.histogram_bins``).
    """

    def __init__(self, enabled: bool, horizon: int, action_dim: int = N_AXES, view_strips: int = 0, bins: int = 6):
        self.enabled = enabled
        self.horizon = int(horizon)
        self.action_dim = int(action_dim)
        self.view = ViewRarity(view_strips, bins) if enabled and view_strips else None
        self.dim = self.action_dim + 3 + (view_strips if self.view else 0) if enabled else 1
        self.reset()

    def reset(self, frame: np.ndarray | None = None) -> None:
        """A new episode, whose first frame (``uint8[H, W, C]``) is ``frame`` when given."""
        self.prev_action = np.zeros(self.action_dim, np.float32)
        self.episode_step = 0
        self.novelty_ema = np.ones(2, np.float32)
        if self.view is not None:
            self.view.reset()
            if frame is not None:
                self.view.see(frame)

    def value(self) -> np.ndarray:
        """The context now: ``float32[dim]``."""
        if not self.enabled:
            return np.zeros(1, np.float32)
        frac = min(self.episode_step / self.horizon, 1.0) if self.horizon else 0.0
        parts = [self.prev_action, np.array([frac], np.float32), self.novelty_ema]
        if self.view is not None:
            parts.append(self.view.value)
        return np.concatenate(parts).astype(np.float32)

    def advance(self, action: np.ndarray, novelty: float, frame: np.ndarray | None = None) -> None:
        """``action`` was taken, scored ``novelty`` and led to ``frame`` (``uint8[H, W, C]``, needed
        with ``view_strips``): one agent step on."""
        self.novelty_ema = (EMA_RATES * self.novelty_ema + (1 - EMA_RATES) * novelty).astype(np.float32)
        self.prev_action = np.asarray(action, np.float32)
        self.episode_step += 1
        if self.view is not None:
            if frame is None:
                raise ValueError("learner.view_strips needs the frame each action led to")
            self.view.see(frame)

    def state(self) -> dict[str, Any]:
        s = {"prev_action": self.prev_action.tolist(), "episode_step": self.episode_step,
             "novelty_ema": self.novelty_ema.tolist()}
        if self.view is not None:
            s["view"] = self.view.state()
        return s

    def load(self, state: dict[str, Any]) -> None:
        self.prev_action = np.array(state["prev_action"], np.float32)
        self.episode_step = int(state["episode_step"])
        self.novelty_ema = np.array(state["novelty_ema"], np.float32)
        if self.view is not None:
            if "view" in state:
                self.view.load(state["view"])
            else:  # a checkpoint written without view_strips: the episode's colours start afresh
                self.view.reset()
