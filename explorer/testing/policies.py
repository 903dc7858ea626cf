"""A fixed Keras policy and the actor that runs it, for loop tests and benchmarks that want a real CNN in
the loop without learning.

Production code never imports this package.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from explorer.agent.networks import build_encoder
from explorer.core import N_AXES, Step, stack_frames


def build_policy(obs_shape: tuple[int, int, int], filters: tuple[int, ...] = (16, 32, 32), feature: int = 128,
                 seed: int = 0, name: str = "policy") -> keras.Model:
    """A fixed, context-free policy ``pi(obs)``: ``uint8[B, H, W, k*C]`` -> ``float32[B, 4]`` in (-1, 1).

    For loop tests and benchmarks that want a real CNN in the loop without learning.
    """
    encoder = build_encoder(obs_shape, filters, feature, seed, f"{name}_encoder")
    inputs = keras.Input(obs_shape, dtype="uint8", name="frames")
    axes = keras.layers.Dense(N_AXES, activation="tanh", name="axes",
                              kernel_initializer=keras.initializers.RandomUniform(-3e-3, 3e-3, seed=seed))(encoder(inputs))
    return keras.Model(inputs, axes, name=name)


class FixedPolicyActor:
    """Acts with a fixed Keras policy ``uint8[B, H, W, k*C] -> float32[B, 4]``; does not learn."""

    def __init__(self, model: keras.Model, eager: bool = False):
        self.model = model
        self._act = self._forward if eager else tf.function(self._forward, reduce_retracing=True)

    def _forward(self, obs: tf.Tensor) -> tf.Tensor:
        return self.model(stack_frames(obs)[None], training=False)[0]

    def act(self, step: Step) -> np.ndarray:
        return self._act(tf.convert_to_tensor(step.obs)).numpy()

    def observe(self, step: Step, action: np.ndarray | None, next_step: Step) -> dict[str, float]:
        return {}
