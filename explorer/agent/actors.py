"""Agents: observation in, stick values out, and an on-line learning hook.

An agent sees only frames (``uint8[k, H, W, C]``, the newest ``k`` frames,
oldest first) and its own past actions; it never sees game internals.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import keras
import numpy as np
import tensorflow as tf

from explorer.agent.networks import stack_frames


@runtime_checkable
class Agent(Protocol):
    """Picks actions and learns from transitions."""

    def act(self, obs: tf.Tensor) -> np.ndarray:
        """``uint8[k, H, W, C]`` → ``float32[4]`` stick values in [-1, 1] (exploration included)."""

    def observe(self, obs: tf.Tensor, action: np.ndarray, next_obs: tf.Tensor, first: bool, last: bool) -> dict[str, float]:
        """Take one transition; may train. Returns metrics (possibly empty)."""

    def close(self) -> None:
        """Finish: flush and save what must be kept."""


class RandomAgent:
    """Uniform random sticks every step (a baseline)."""

    def __init__(self, seed: int = 0, sticky_steps: int = 1):
        self.rng = np.random.default_rng(seed)
        self.sticky_steps = sticky_steps
        self._held = np.zeros(4, np.float32)
        self._age = sticky_steps

    def act(self, obs: tf.Tensor) -> np.ndarray:
        if self._age >= self.sticky_steps:
            self._held = self.rng.uniform(-1.0, 1.0, 4).astype(np.float32)
            self._age = 0
        self._age += 1
        return self._held.copy()

    def observe(self, obs, action, next_obs, first, last) -> dict[str, float]:
        return {}

    def close(self) -> None:
        pass


class PolicyAgent:
    """Acts with a Keras policy; does not learn (learning agents live in :mod:`explorer.agent.learner`)."""

    def __init__(self, model: keras.Model, eager: bool = False):
        self.model = model
        self._act = self._forward if eager else tf.function(self._forward, reduce_retracing=True)

    def _forward(self, obs: tf.Tensor) -> tf.Tensor:
        return self.model(stack_frames(obs)[None], training=False)[0]

    def act(self, obs: tf.Tensor) -> np.ndarray:
        return self._act(tf.convert_to_tensor(obs)).numpy()

    def observe(self, obs, action, next_obs, first, last) -> dict[str, float]:
        return {}

    def close(self) -> None:
        pass


def make_agent(config, obs_shape: tuple[int, int, int], run_path=None, live: bool = False, resume=None) -> Agent:
    """The agent ``config.run.agent`` names, for frames of ``obs_shape`` (``(H, W, C)``).

    ``live`` puts the learning agent's training on its own thread
    (:class:`explorer.agent.threaded.ThreadedAgent`), so a real-time loop never waits for it.
    ``resume`` is a run directory whose latest checkpoint the learning agent
    continues from (an explore, play or replay run).
    """
    run = config.run
    if run.agent == "random":
        return RandomAgent(run.seed)
    if run.agent == "sticky":
        return RandomAgent(run.seed, sticky_steps=run.sticky_steps)
    from explorer.agent.learner import build_agent
    shape = (config.observation.stack, *obs_shape)
    agent = build_agent(config.learner, config.novelty, shape, episode_steps=0 if live else config.game.episode_steps)
    if resume is not None:
        from pathlib import Path

        from explorer.agent.checkpoint import Checkpointer
        Checkpointer(agent, Path(resume) / "checkpoints").restore()
        agent.new_episode = True  # whatever the game is doing now, it is not where the run stopped
    if live:
        from explorer.agent.threaded import ThreadedAgent
        return ThreadedAgent(agent, config.learner)
    return agent
