"""Networks: the one conv encoder, the actor, the twin Q heads, and how actor outputs become sticks.

Observations reach every network stacked along channels, ``uint8[H, W, k*C]``
(:func:`explorer.core.stack_frames`). Weights are built once; models are called
as ``model(x, training=...)``.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from explorer.config import LearnerConfig
from explorer.core import N_AXES, TRIGGERS, action_dim

LOG_STD_MIN, LOG_STD_MAX = -5.0, 1.0


def _init(seed: int) -> keras.initializers.Initializer:
    return keras.initializers.GlorotUniform(seed=seed)


def build_encoder(obs_shape: tuple[int, ...], filters: tuple[int, ...], feature: int, seed: int, name: str) -> keras.Model:
    """``uint8[H, W, k*C]`` -> ``float32[feature]``: strided 3x3 convs, a dense layer, LayerNorm, tanh."""
    x_in = keras.Input(obs_shape, dtype="uint8")
    x = keras.layers.Rescaling(1.0 / 255)(x_in)
    for i, f in enumerate(filters):
        x = keras.layers.Conv2D(f, 3, strides=2, activation="relu", kernel_initializer=_init(seed + i), name=f"{name}_conv{i}")(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(feature, kernel_initializer=_init(seed + 10), name=f"{name}_dense")(x)
    x = keras.layers.LayerNormalization(name=f"{name}_norm")(x)
    x = keras.layers.Activation("tanh")(x)
    return keras.Model(x_in, x, name=name)


def actor_outputs(config: LearnerConfig, dim: int = N_AXES) -> int:
    """Width of the actor's output for ``dim``-wide actions: a pre-tanh mean per axis (button outputs
    included), and for SAC a log-std per axis."""
    return 2 * dim if config.algo == "sac" else dim


def build_actor_head(feature: int, ctx_dim: int, config: LearnerConfig, dim: int = N_AXES) -> keras.Model:
    """The actor after its encoder: ``(float32[feature], float32[ctx])`` -> pre-tanh outputs."""
    f_in = keras.Input([feature], name="features")
    ctx_in = keras.Input([ctx_dim], name="context")
    h = keras.layers.Concatenate()([f_in, ctx_in])
    h = keras.layers.Dense(config.networks.hidden, activation="relu", kernel_initializer=_init(config.seed + 111))(h)
    h = keras.layers.Dense(config.networks.hidden, activation="relu", kernel_initializer=_init(config.seed + 112))(h)
    y = keras.layers.Dense(actor_outputs(config, dim),
                           kernel_initializer=keras.initializers.RandomUniform(-3e-3, 3e-3, seed=config.seed + 113),
                           name="actor_out")(h)
    return keras.Model([f_in, ctx_in], y, name="actor_head")


def build_actor(obs_shape: tuple[int, ...], ctx_dim: int, config: LearnerConfig, dim: int = N_AXES) -> keras.Model:
    """The actor with an encoder of its own: ``(uint8[H, W, k*C], float32[ctx])`` -> pre-tanh outputs."""
    obs_in = keras.Input(obs_shape, dtype="uint8", name="obs")
    ctx_in = keras.Input([ctx_dim], name="context")
    h = build_encoder(obs_shape, config.networks.filters, config.networks.feature, config.seed + 100, "actor_encoder")(obs_in)
    y = build_actor_head(config.networks.feature, ctx_dim, config, dim)([h, ctx_in])
    return keras.Model([obs_in, ctx_in], y, name="actor")


def core_width(ctx_dim: int, config: LearnerConfig) -> int:
    """Width of the context the heads read: ``ctx_dim``, or with ``learner.networks.recurrent_units`` the
    context before the core's inputs, then the core's state (:func:`build_core`)."""
    from explorer.agent.context import RecurrentInput

    units = config.networks.recurrent_units
    if not units:
        return ctx_dim
    return ctx_dim - config.networks.recurrent_window * (RecurrentInput.WIDTH + 1)  # the inputs go, the state stays


def build_core(ctx_dim: int, config: LearnerConfig, name: str = "core") -> keras.Model:
    """The trained recurrent core (``learner.networks.recurrent_units``): ``float32[ctx]`` -> ``float32[core_width]``.

    The context ends with what :class:`~explorer.agent.context.RecurrentInput` keeps: the inputs of the
    last ``recurrent_window`` agent steps, which of them belong to the episode, and the stored state
    before the oldest. A GRU runs over the episode's steps of the window from that state; its state
    after the newest replaces them, after the rest of the context.
    """
    from explorer.agent.context import RecurrentInput

    units, window, width = config.networks.recurrent_units, config.networks.recurrent_window, RecurrentInput.WIDTH
    base = ctx_dim - window * (width + 1) - units
    if base < 0:
        raise ValueError(f"a context of {ctx_dim} values cannot hold a recurrent core's inputs ({window} steps of "
                         f"{width}, their flags and {units} units)")
    c_in = keras.Input([ctx_dim], name="context")
    steps = keras.layers.Reshape((window, width))(c_in[:, base:base + window * width])
    valid = c_in[:, base + window * width:base + window * (width + 1)] > 0.5
    start = c_in[:, ctx_dim - units:]
    gru = keras.layers.GRU(units, unroll=True, kernel_initializer=_init(config.seed + 501),
                           recurrent_initializer=keras.initializers.Orthogonal(seed=config.seed + 502), name="gru")
    state = gru(steps, mask=valid, initial_state=[start])
    return keras.Model(c_in, keras.layers.Concatenate()([c_in[:, :base], state]), name=name)


def build_policy_net(obs_shape: tuple[int, ...], ctx_dim: int, config: LearnerConfig,
                     encoder: keras.Model | None = None, dim: int = N_AXES,
                     core: keras.Model | None = None) -> tuple[keras.Model, keras.Model]:
    """``(actor, policy_net)``: what the actor loss trains, and the whole ``(obs, ctx) -> outputs`` model.

    With ``config.networks.shared_encoder`` the policy is ``encoder`` (the critic's) followed by an actor
    head, and the actor loss trains the head only; otherwise both are one model. With
    ``learner.networks.recurrent_units`` the head reads the context through the recurrent ``core`` (the
    critics'; one of its own when not given), whose weights the policy's carry.
    """
    if not config.networks.shared_encoder:
        actor = build_actor(obs_shape, ctx_dim, config, dim)
        return actor, actor
    assert encoder is not None, "a shared-encoder policy needs the critic's encoder"
    if config.networks.recurrent_units and core is None:
        core = build_core(ctx_dim, config)
    head = build_actor_head(config.networks.feature, core_width(ctx_dim, config), config, dim)
    obs_in = keras.Input(obs_shape, dtype="uint8", name="obs")
    ctx_in = keras.Input([ctx_dim], name="context")
    read = ctx_in if core is None else core(ctx_in)
    return head, keras.Model([obs_in, ctx_in], head([encoder(obs_in), read]), name="policy")


def build_heads(feature: int, ctx_dim: int, config: LearnerConfig, seed: int, name: str,
                dim: int = N_AXES) -> keras.Model:
    """Twin Q heads: ``(features, float32[dim] action, context)`` -> ``float32[2]``."""
    f_in = keras.Input([feature])
    a_in = keras.Input([dim])
    c_in = keras.Input([ctx_dim])
    x = keras.layers.Concatenate()([f_in, a_in, c_in])
    qs = []
    for j in range(2):
        h = keras.layers.Dense(config.networks.hidden, activation="relu", kernel_initializer=_init(seed + 10 * j))(x)
        h = keras.layers.Dense(config.networks.hidden, activation="relu", kernel_initializer=_init(seed + 10 * j + 1))(h)
        qs.append(keras.layers.Dense(1, kernel_initializer=_init(seed + 10 * j + 2))(h))
    return keras.Model([f_in, a_in, c_in], keras.layers.Concatenate()(qs), name=name)


def build_model_head(feature: int, config: LearnerConfig, out: int, dim: int = N_AXES) -> keras.Model:
    """The planner's model after the encoder: ``(features, float32[dim] action)`` -> ``float32[out]``, how the
    novelty embedding of the frame one decision later differs from the newest frame's (``learner.actions.plan_candidates``)."""
    f_in = keras.Input([feature])
    a_in = keras.Input([dim])
    h = keras.layers.Concatenate()([f_in, a_in])
    h = keras.layers.Dense(config.networks.hidden, activation="relu", kernel_initializer=_init(config.seed + 401))(h)
    h = keras.layers.Dense(config.networks.hidden, activation="relu", kernel_initializer=_init(config.seed + 402))(h)
    y = keras.layers.Dense(out, kernel_initializer=_init(config.seed + 403))(h)
    return keras.Model([f_in, a_in], y, name="model_head")


class StickRange:
    """Where the policy's squashed outputs land, and how its buttons are sent.

    Sticks: ``[-1, 1]`` per axis mapped linearly onto ``[action_low, action_high]``. Buttons (one
    output each after the four axes, ``buttons`` names them) keep the full range with a prior of
    ``2 * press_share - 1``, so a uniform draw in [-1, 1] moved by it presses the button in
    ``learner.actions.press_share`` of draws (half by default); triggers keep a prior of 0.
    :meth:`press` sends each as pressed (1) or released (-1). ``prior`` is ``action_prior`` in squashed
    units (its place in the range, mapped onto [-1, 1]), then the buttons'. Calling it maps squashed
    values (numpy arrays or tensors) to action values; with the full range [-1, 1] on every stick axis
    it returns its input unchanged.
    """

    def __init__(self, config: LearnerConfig, buttons: tuple[str, ...] = ()):
        n = len(buttons)
        low = np.concatenate([np.asarray(config.actions.action_low, np.float64), -np.ones(n)])
        high = np.concatenate([np.asarray(config.actions.action_high, np.float64), np.ones(n)])
        self.buttons = tuple(buttons)
        self.dim = action_dim(self.buttons)
        self.full = bool(np.all(low == -1.0) and np.all(high == 1.0))
        self.low, self.half = low.astype(np.float32), ((high - low) / 2).astype(np.float32)
        # 1 where an output is a button (pressed or released); sticks and triggers stay continuous
        self._binary = np.array([0.0] * N_AXES + [0.0 if b in TRIGGERS else 1.0 for b in self.buttons], np.float32)
        pressed = self._binary[N_AXES:] * (2 * config.actions.press_share - 1)  # a trigger's prior stays 0
        prior = np.concatenate([np.asarray(config.actions.action_prior, np.float64), pressed])
        self.prior = ((prior - low) / (high - low) * 2 - 1).astype(np.float32)

    def __call__(self, squashed: Any) -> Any:
        return squashed if self.full else self.low + (squashed + 1.0) * self.half

    def press(self, action: tf.Tensor) -> tf.Tensor:
        """Buttons as the pad sends them, 1 or -1, for the critic; the gradient is the continuous
        output's (straight-through), so the actor loss reaches the button heads."""
        if not self._binary.any():
            return action
        sent = tf.where(action > 0, 1.0, -1.0)
        return action + tf.stop_gradient((sent - action) * self._binary)

    def prior_offset(self, algo: str, residual: float = 0.0) -> tf.Tensor:
        """``atanh(prior)`` added to the actor's pre-tanh means (zeros after them for SAC's log-stds); zeros
        for a residual policy, whose proposal carries the prior (``learner.actions.residual``)."""
        prior = np.zeros_like(self.prior) if residual else np.arctanh(self.prior)
        if algo == "sac":
            prior = np.concatenate([prior, np.zeros(self.dim, np.float32)])
        return tf.constant(prior, tf.float32)


def corrected(proposal: Any, squashed: Any, residual: float) -> Any:
    """A residual policy's action in squashed units: ``proposal`` plus ``residual`` times the policy's
    squashed output, put back on [-1, 1] (numpy arrays or tensors; ``learner.actions.residual``)."""
    if isinstance(squashed, tf.Tensor):
        return tf.clip_by_value(proposal + residual * squashed, -1.0, 1.0)
    return np.clip(proposal + residual * squashed, -1.0, 1.0)


def split_outputs(y: tf.Tensor, algo: str) -> tuple[tf.Tensor, tf.Tensor]:
    """The actor's outputs (prior included) as ``(pre-tanh mean, log-std)``; TD3's log-std is a dummy zero."""
    if algo == "sac":
        mean, log_std = tf.split(y, 2, axis=-1)
        return mean, tf.clip_by_value(log_std, LOG_STD_MIN, LOG_STD_MAX)
    return y, tf.zeros_like(y)
