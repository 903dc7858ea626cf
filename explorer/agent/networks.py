"""Frame stacking, and a plain CNN policy (frames in, four tanh stick values out).

The learning agent's actor lives in :mod:`explorer.agent.learner` (it also takes a
context input); :func:`build_policy` is the context-free CNN used where a
fixed, non-learning policy is wanted (tests, dry runs, benchmarks of the loop).
Weights are built once; the model is called as ``model(x, training=False)``.
"""

from __future__ import annotations

import keras
import tensorflow as tf


def stack_frames(frames: tf.Tensor) -> tf.Tensor:
    """``uint8[..., k, H, W, C]`` frames → ``uint8[..., H, W, k*C]`` (frames along channels, oldest first)."""
    shape = tf.shape(frames)
    rank = frames.shape.rank
    perm = list(range(rank - 4)) + [rank - 3, rank - 2, rank - 4, rank - 1]
    moved = tf.transpose(frames, perm)
    return tf.reshape(moved, tf.concat([shape[:-4], shape[-3:-1], [shape[-4] * shape[-1]]], 0))


def build_encoder(obs_shape: tuple[int, int, int], filters: tuple[int, ...] = (16, 32, 32), hidden: int = 128,
                  name: str = "encoder") -> keras.Model:
    """Conv encoder: ``uint8[B, H, W, k*C]`` → ``float32[B, hidden]``."""
    inputs = keras.Input(obs_shape, dtype="uint8", name="frames")
    x = keras.layers.Rescaling(1.0 / 255.0)(keras.ops.cast(inputs, "float32"))
    for i, f in enumerate(filters):
        x = keras.layers.Conv2D(f, 3, strides=2, padding="same", activation="relu", name=f"conv{i}")(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(hidden, activation="relu", name="dense")(x)
    return keras.Model(inputs, x, name=name)


def build_policy(obs_shape: tuple[int, int, int], filters: tuple[int, ...] = (16, 32, 32), hidden: int = 128,
                 name: str = "policy") -> keras.Model:
    """A deterministic policy ``π(obs)``: ``uint8[B, H, W, k*C]`` → ``float32[B, 4]`` in (-1, 1)."""
    encoder = build_encoder(obs_shape, filters, hidden, name=f"{name}_encoder")
    inputs = keras.Input(obs_shape, dtype="uint8", name="frames")
    axes = keras.layers.Dense(4, activation="tanh", name="axes",
                              kernel_initializer=keras.initializers.RandomUniform(-3e-3, 3e-3))(encoder(inputs))
    return keras.Model(inputs, axes, name=name)
