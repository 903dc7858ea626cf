"""The surrogate learner: how a black-box novelty score reaches the policy's weights.

Novelty is computed from frames and has no gradient to the policy (the game is
in between). Twin critics ``Q(obs, a)`` are fitted by n-step temporal
difference to the novelty the agent observed, with target networks; the actor
climbs ``Q(obs, pi(obs))`` under a tape. The gradient runs loss -> Q -> a -> actor
weights, entirely in TensorFlow. :func:`explorer.agent.guard.check_gradients` checks
that path when the learner is built.

:class:`LearningAgent` implements the agent protocol (``act``, ``observe``,
``close``) plus ``save_state``/``restore_state`` for checkpoints. Observations
handed to it are ``uint8[k, H, W, C]`` (oldest first); inside, they are stacked along channels
as ``uint8[H, W, k*C]``. Episode boundaries come from ``observe``'s
``first``/``last`` flags; no extra call is needed::

    agent = build_agent(LearnerConfig(), NoveltyConfig(), (k, H, W, C), episode_steps=525)
    action = agent.act(obs)                       # float32[4] in [-1, 1], noise included
    metrics = agent.observe(obs, action, next_obs, first, last)   # {"novelty": ..., losses when it trained}
    Checkpointer(agent, run_dir / "checkpoints").save(agent.steps)   # explorer.agent.checkpoint; .restore() to resume
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from explorer.agent.guard import GradientPathError, check_gradients
from explorer.agent.novelty import Novelty, make_novelty
from explorer.config import LearnerConfig, NoveltyConfig

ACTION_DIM = 4
LOG_STD_MIN, LOG_STD_MAX = -5.0, 1.0
_EMA_RATES = np.array([0.8, 0.95], np.float32)  # recent-novelty averages in the context (~5 and ~20 steps)


class NonFiniteLossError(FloatingPointError):
    """A loss or gradient became NaN/Inf during training."""


# ---------------------------------------------------------------- pure math

def td_targets(reward: tf.Tensor, discount: tf.Tensor, next_q: tf.Tensor,
               next_logp: tf.Tensor | None = None, alpha: tf.Tensor | float = 0.0) -> tf.Tensor:
    """Soft TD targets ``r + discount * (Q'(s', a') - alpha * log pi(a'|s'))`` (no gradient).

    Args:
      reward: ``float32[B]``, n-step discounted novelty sums.
      discount: ``float32[B]``, ``gamma**n``, or 0 where the episode ended.
      next_q: ``float32[B]``, min of the target critics at the next action.
      next_logp: ``float32[B]`` log-probability of the next action (SAC), or None (TD3).
      alpha: entropy weight.
    """
    soft = next_q if next_logp is None else next_q - alpha * next_logp
    return tf.stop_gradient(reward + discount * soft)


def squash(mean: tf.Tensor, log_std: tf.Tensor, eps: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Reparameterised squashed Gaussian: ``a = tanh(mean + std * eps)`` and ``log pi(a)`` per axis.

    Returns:
      ``a`` and the log-density of each axis (``[..., 4]``; their sum is ``log pi(a)``).
    """
    std = tf.exp(log_std)
    u = mean + std * eps
    a = tf.tanh(u)
    logp = -0.5 * tf.square(eps) - log_std - 0.5 * np.log(2 * np.pi)
    logp -= 2.0 * (np.log(2.0) - u - tf.nn.softplus(-2.0 * u))
    return a, logp


def shift_crop(images: tf.Tensor, pad: int, offsets: tf.Tensor) -> tf.Tensor:
    """Pad ``images`` (``[B, H, W, C]``) by ``pad`` pixels (edge rows/columns mirrored) and crop back at ``offsets``.

    Args:
      offsets: ``int32[2, B]``, row and column offsets in ``[0, 2 * pad]``; ``pad`` leaves a picture where it was.
    """
    h, w = images.shape[1], images.shape[2]
    padded = tf.pad(images, [[0, 0], [pad, pad], [pad, pad], [0, 0]], mode="SYMMETRIC")
    rows = offsets[0][:, None] + tf.range(h)[None]
    cols = offsets[1][:, None] + tf.range(w)[None]
    return tf.gather(tf.gather(padded, rows, axis=1, batch_dims=1), cols, axis=2, batch_dims=1)


# ---------------------------------------------------------------- networks

def _init(seed: int) -> keras.initializers.Initializer:
    return keras.initializers.GlorotUniform(seed=seed)


def build_encoder(obs_shape: tuple[int, ...], config: LearnerConfig, seed: int, name: str) -> keras.Model:
    """``uint8[H, W, k*C]`` -> ``float32[feature]``: strided convs, a dense layer, LayerNorm, tanh."""
    x_in = keras.Input(obs_shape, dtype="uint8")
    x = keras.layers.Rescaling(1.0 / 255)(x_in)
    for i, f in enumerate(config.filters):
        x = keras.layers.Conv2D(f, 3, strides=2, activation="relu", kernel_initializer=_init(seed + i), name=f"{name}_conv{i}")(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(config.feature, kernel_initializer=_init(seed + 10), name=f"{name}_dense")(x)
    x = keras.layers.LayerNormalization(name=f"{name}_norm")(x)
    x = keras.layers.Activation("tanh")(x)
    return keras.Model(x_in, x, name=name)


def build_actor(obs_shape: tuple[int, ...], ctx_dim: int, config: LearnerConfig) -> keras.Model:
    """Policy CNN: ``(uint8[H, W, k*C], float32[ctx])`` -> pre-tanh means (and log-stds for SAC)."""
    obs_in = keras.Input(obs_shape, dtype="uint8", name="obs")
    ctx_in = keras.Input([ctx_dim], name="context")
    h = build_encoder(obs_shape, config, config.seed + 100, "actor_encoder")(obs_in)
    y = build_actor_head(config.feature, ctx_dim, config)([h, ctx_in])
    return keras.Model([obs_in, ctx_in], y, name="actor")


def build_actor_head(feature: int, ctx_dim: int, config: LearnerConfig) -> keras.Model:
    """The actor after its encoder (its own, or the critic's when shared).

    ``(float32[feature], float32[ctx])`` -> pre-tanh outputs.
    """
    out = 2 * ACTION_DIM if config.algo == "sac" else ACTION_DIM
    f_in = keras.Input([feature], name="features")
    ctx_in = keras.Input([ctx_dim], name="context")
    h = keras.layers.Concatenate()([f_in, ctx_in])
    h = keras.layers.Dense(config.hidden, activation="relu", kernel_initializer=_init(config.seed + 111))(h)
    h = keras.layers.Dense(config.hidden, activation="relu", kernel_initializer=_init(config.seed + 112))(h)
    y = keras.layers.Dense(out, kernel_initializer=keras.initializers.RandomUniform(-3e-3, 3e-3, seed=config.seed + 113),
                           name="actor_out")(h)
    return keras.Model([f_in, ctx_in], y, name="actor_head")


def build_heads(feature: int, ctx_dim: int, config: LearnerConfig, seed: int, name: str) -> keras.Model:
    """Twin Q heads: ``(features, action, context)`` -> ``float32[2]``."""
    f_in = keras.Input([feature])
    a_in = keras.Input([ACTION_DIM])
    c_in = keras.Input([ctx_dim])
    x = keras.layers.Concatenate()([f_in, a_in, c_in])
    qs = []
    for j in range(2):
        h = keras.layers.Dense(config.hidden, activation="relu", kernel_initializer=_init(seed + 10 * j))(x)
        h = keras.layers.Dense(config.hidden, activation="relu", kernel_initializer=_init(seed + 10 * j + 1))(h)
        qs.append(keras.layers.Dense(1, kernel_initializer=_init(seed + 10 * j + 2))(h))
    return keras.Model([f_in, a_in, c_in], keras.layers.Concatenate()(qs), name=name)


# ---------------------------------------------------------------- replay

class Replay:
    """Transitions over a ring of single ``uint8[H, W, C]`` frames, under a memory cap.

    Each frame is stored once; a transition holds the global ids of its ``k``
    observation frames and ``k`` next-observation frames (n steps later). A
    transition whose frames were overwritten is never sampled.
    """

    def __init__(self, frame_shape: tuple[int, int, int], stack: int, ctx_dim: int, memory_mb: float, seed: int):
        self.frame_shape = tuple(frame_shape)
        self.stack = stack
        frame_bytes = int(np.prod(frame_shape))
        #: frames kept, and transitions kept (one per frame pushed)
        self.capacity = n = max(4 * stack, int(memory_mb * 2**20 / (frame_bytes + 64)))
        # Touch every page now: the whole memory cap is taken at the start, so a long run's
        # memory stays flat instead of creeping up as the replay fills (and a cap the machine
        # cannot hold fails at once, not an hour in).
        self.frames = np.empty((n, *frame_shape), np.uint8)
        self.frames.fill(0)
        self.obs_ids = np.zeros((n, stack), np.int64)
        self.next_ids = np.zeros((n, stack), np.int64)
        self.action = np.zeros((n, ACTION_DIM), np.float32)
        self.reward = np.zeros(n, np.float32)
        self.discount = np.zeros(n, np.float32)
        self.ctx = np.zeros((n, ctx_dim), np.float32)
        self.next_ctx = np.zeros((n, ctx_dim), np.float32)
        self.frames_written = 0
        self.written = 0
        self.rng = np.random.default_rng(seed)
        # Live mode adds from the control thread and samples from the learner thread.
        self.lock = threading.Lock()

    def push_frame(self, frame: np.ndarray) -> int:
        with self.lock:
            self.frames[self.frames_written % self.capacity] = frame
            self.frames_written += 1
            return self.frames_written - 1

    def add(self, obs_ids, action, reward, discount, next_ids, ctx, next_ctx) -> None:
        with self.lock:
            i = self.written % self.capacity
            self.obs_ids[i], self.next_ids[i] = obs_ids, next_ids
            self.action[i], self.reward[i], self.discount[i] = action, reward, discount
            self.ctx[i], self.next_ctx[i] = ctx, next_ctx
            self.written += 1

    def __len__(self) -> int:
        return min(self.written, self.capacity)

    def _stacked(self, ids: np.ndarray) -> np.ndarray:
        f = self.frames[ids % self.capacity]  # [B, k, H, W, C]
        b, k, h, w, c = f.shape
        return f.transpose(0, 2, 3, 1, 4).reshape(b, h, w, k * c)

    def sample(self, batch: int) -> dict[str, np.ndarray]:
        with self.lock:
            return self._sample(batch)

    def _sample(self, batch: int) -> dict[str, np.ndarray]:
        # A frame pushed after a transition was sampled may overwrite the oldest slot; the
        # lock keeps the ids and the frames they point to consistent within one batch.
        oldest = self.frames_written - self.capacity
        idx = self.rng.integers(0, len(self), size=batch)
        stale = self.obs_ids[idx, 0] < oldest
        while stale.any():
            idx[stale] = self.rng.integers(0, len(self), size=int(stale.sum()))
            stale = self.obs_ids[idx, 0] < oldest
        return {"obs": self._stacked(self.obs_ids[idx]), "action": self.action[idx], "reward": self.reward[idx],
                "discount": self.discount[idx], "next_obs": self._stacked(self.next_ids[idx]),
                "ctx": self.ctx[idx], "next_ctx": self.next_ctx[idx]}

    def state(self) -> dict[str, np.ndarray]:
        n = len(self)
        return {"frames": self.frames[: min(self.frames_written, self.capacity)], "obs_ids": self.obs_ids[:n],
                "next_ids": self.next_ids[:n], "action": self.action[:n], "reward": self.reward[:n],
                "discount": self.discount[:n], "ctx": self.ctx[:n], "next_ctx": self.next_ctx[:n],
                "counters": np.array([self.frames_written, self.written], np.int64)}

    def load(self, state: dict[str, np.ndarray]) -> None:
        self.frames_written, self.written = (int(x) for x in state["counters"])
        self.frames[: len(state["frames"])] = state["frames"]
        n = len(state["obs_ids"])
        for key in ("obs_ids", "next_ids", "action", "reward", "discount", "ctx", "next_ctx"):
            getattr(self, key)[:n] = state[key]


# ---------------------------------------------------------------- learner

class StickRange:
    """Where the policy's squashed outputs land: ``[-1, 1]`` per axis mapped linearly onto ``[action_low, action_high]``.

    ``prior`` is ``action_prior`` in squashed units (its place in the range, mapped onto [-1, 1]).
    Calling it maps squashed values (numpy arrays or tensors) to stick values; with the full
    range [-1, 1] on every axis it returns its input unchanged.
    """

    def __init__(self, config: LearnerConfig):
        low, high = np.asarray(config.action_low, np.float64), np.asarray(config.action_high, np.float64)
        self.full = bool(np.all(low == -1.0) and np.all(high == 1.0))
        self.low, self.half = low.astype(np.float32), ((high - low) / 2).astype(np.float32)
        self.prior = ((np.asarray(config.action_prior, np.float64) - low) / (high - low) * 2 - 1).astype(np.float32)

    def __call__(self, squashed: Any) -> Any:
        return squashed if self.full else self.low + (squashed + 1.0) * self.half


class Learner:
    """Twin critics with targets, an actor, (SAC) an entropy weight, and the compiled train step."""

    def __init__(self, config: LearnerConfig, novelty: Novelty, obs_shape: tuple[int, int, int], ctx_dim: int):
        self.config = config
        self.novelty = novelty
        self.obs_shape = tuple(obs_shape)
        self.ctx_dim = ctx_dim
        self.encoder = build_encoder(self.obs_shape, config, config.seed + 200, "critic_encoder")
        # The policy maps (obs, context) to the actor's outputs. With a shared encoder it is the
        # critic's encoder followed by the actor head, and the actor loss trains the head only.
        self.actor, self.policy_net = self._build_policy(self.encoder)
        self.sticks = StickRange(config)
        prior = np.arctanh(self.sticks.prior)
        if config.algo == "sac":  # the log-stds follow the means in the actor's outputs
            prior = np.concatenate([prior, np.zeros(ACTION_DIM, np.float32)])
        self._prior_offset = tf.constant(prior, tf.float32)
        self.heads = build_heads(config.feature, ctx_dim, config, config.seed + 300, "critic_heads")
        self.target_encoder = build_encoder(self.obs_shape, config, config.seed + 200, "target_encoder")
        self.target_heads = build_heads(config.feature, ctx_dim, config, config.seed + 300, "target_heads")
        for src, dst in ((self.encoder, self.target_encoder), (self.heads, self.target_heads)):
            for s, d in zip(src.weights, dst.weights, strict=True):
                d.assign(s)
        # One entropy weight per axis: otherwise SAC can park all its entropy in an axis
        # that does nothing (camera y with look_scale 0) and act deterministically on the rest.
        self.log_alpha = tf.Variable(np.full(ACTION_DIM, np.log(config.init_alpha)), dtype=tf.float32, name="log_alpha")
        self.actor_opt = keras.optimizers.Adam(config.actor_lr)
        self.critic_opt = keras.optimizers.Adam(config.critic_lr)
        self.alpha_opt = keras.optimizers.Adam(config.alpha_lr)
        self.critic_vars = self.encoder.trainable_variables + self.heads.trainable_variables
        self.actor_opt.build(self.actor.trainable_variables)
        self.critic_opt.build(self.critic_vars)
        self.alpha_opt.build([self.log_alpha])
        self.updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="updates")
        self.rng = tf.random.Generator.from_seed(config.seed + 1)
        b = config.batch_size
        spec = {"obs": tf.TensorSpec([b, *self.obs_shape], tf.uint8), "action": tf.TensorSpec([b, ACTION_DIM], tf.float32),
                "reward": tf.TensorSpec([b], tf.float32), "discount": tf.TensorSpec([b], tf.float32),
                "next_obs": tf.TensorSpec([b, *self.obs_shape], tf.uint8), "ctx": tf.TensorSpec([b, ctx_dim], tf.float32),
                "next_ctx": tf.TensorSpec([b, ctx_dim], tf.float32)}
        act_spec = [tf.TensorSpec([1, *self.obs_shape], tf.uint8), tf.TensorSpec([1, ctx_dim], tf.float32)]
        # Compiled (tf.function) unless config.eager; typed loosely for that reason.
        self._step: Any
        self._critic_only: Any
        self._policy: Any
        if config.eager:
            self._step, self._critic_only, self._policy = self._train_step, self._critic_step, self._policy_out
        else:
            self._step = tf.function(lambda batch: self._train_step(batch), input_signature=[spec])
            self._critic_only = tf.function(lambda batch: self._critic_step(batch), input_signature=[spec])
            self._policy = tf.function(self._policy_out, input_signature=act_spec)
        self._spec = spec
        self.check_path()
        self.warm_up()

    def _build_policy(self, encoder: keras.Model) -> tuple[keras.Model, keras.Model]:
        """``(actor, policy_net)``: what the actor loss trains, and the whole ``(obs, ctx) -> outputs`` model."""
        if not self.config.shared_encoder:
            actor = build_actor(self.obs_shape, self.ctx_dim, self.config)
            return actor, actor
        head = build_actor_head(self.config.feature, self.ctx_dim, self.config)
        obs_in = keras.Input(self.obs_shape, dtype="uint8", name="obs")
        ctx_in = keras.Input([self.ctx_dim], name="context")
        return head, keras.Model([obs_in, ctx_in], head([encoder(obs_in), ctx_in]), name="policy")

    def augment(self, obs: tf.Tensor) -> tf.Tensor:
        """Random shift of a batch of observations by up to ``config.augment`` pixels (identity when 0)."""
        pad = self.config.augment
        if not pad:
            return obs
        offsets = self.rng.uniform([2, tf.shape(obs)[0]], minval=0, maxval=2 * pad + 1, dtype=tf.int32)
        return shift_crop(obs, pad, offsets)

    # -- pieces used by the step and by the guard
    def alpha(self) -> tf.Tensor:
        return tf.exp(self.log_alpha) if self.config.algo == "sac" else tf.zeros([ACTION_DIM])

    def _with_prior(self, y: tf.Tensor) -> tf.Tensor:
        """The actor's outputs with ``atanh(prior)`` added to their pre-tanh means (the prior in squashed units)."""
        return y + self._prior_offset

    def _policy_out(self, obs: tf.Tensor, ctx: tf.Tensor, actor: keras.Model | None = None) -> tuple[tf.Tensor, tf.Tensor]:
        """Pre-tanh mean and log-std (TD3: log-std is a dummy zero), from ``actor`` (default: the trained one)."""
        y = self._with_prior((actor or self.policy_net)([obs, ctx], training=False))
        if self.config.algo == "sac":
            mean, log_std = tf.split(y, 2, axis=-1)
            return mean, tf.clip_by_value(log_std, LOG_STD_MIN, LOG_STD_MAX)
        return y, tf.zeros_like(y)

    def _actor_out(self, obs: tf.Tensor, ctx: tf.Tensor, training: bool, features: tf.Tensor | None = None) -> tf.Tensor:
        if not self.config.shared_encoder:
            return self._with_prior(self.actor([obs, ctx], training=training))
        if features is None:
            features = self.encoder(obs, training=False)
        return self._with_prior(self.actor([tf.stop_gradient(features), ctx], training=training))

    def _sample(self, obs: tf.Tensor, ctx: tf.Tensor, training: bool,
                features: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Action in [-1, 1], its per-axis log-prob ``[B, 4]`` (SAC; zeros for TD3) and the pre-tanh mean.

        ``features``: the critic encoder's features of ``obs``, used (held fixed) by a shared-encoder actor.
        """
        y = self._actor_out(obs, ctx, training, features)
        if self.config.algo == "sac":
            mean, log_std = tf.split(y, 2, axis=-1)
            log_std = tf.clip_by_value(log_std, LOG_STD_MIN, LOG_STD_MAX)
            a, logp = squash(mean, log_std, self.rng.normal(tf.shape(mean)))
            return self.sticks(a), logp, mean
        return self.sticks(tf.tanh(y)), tf.zeros_like(y), y

    def actor_loss(self, obs: tf.Tensor, ctx: tf.Tensor, features: tf.Tensor) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """``mean(alpha * log pi - min Q(obs, pi(obs))) + penalty * mean(pre-tanh^2)``; critics held fixed."""
        a, logp, mean = self._sample(obs, ctx, training=True, features=features)
        q = tf.reduce_min(self.heads([tf.stop_gradient(features), a, ctx], training=False), axis=-1)
        penalty = self.config.preact_penalty * tf.reduce_mean(tf.square(mean))
        loss = tf.reduce_mean(tf.reduce_sum(tf.stop_gradient(self.alpha()) * logp, -1) - q) + penalty
        return loss, {"actor_loss": loss, "q": tf.reduce_mean(q), "logp": tf.reduce_mean(tf.reduce_sum(logp, -1)),
                      "logp_axes": tf.reduce_mean(logp, 0), "abs_mean": tf.reduce_mean(tf.abs(mean))}

    def critic_loss(self, batch: dict[str, tf.Tensor],
                    obs: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor, dict[str, tf.Tensor]]:
        """Squared TD error of both critics, their features of ``obs`` (default: the batch's, shifted) and metrics."""
        c = self.config
        if obs is None:
            obs = self.augment(batch["obs"])
        next_obs, next_ctx = self.augment(batch["next_obs"]), batch["next_ctx"]
        next_features = self.target_encoder(next_obs, training=False)
        if c.algo == "sac":
            next_a, next_logp_axes, _ = self._sample(next_obs, next_ctx, training=False, features=next_features)
            next_logp = tf.reduce_sum(self.alpha() * next_logp_axes, -1)
        else:
            y = self._actor_out(next_obs, next_ctx, False, next_features)
            noise = tf.clip_by_value(c.td3_target_noise * self.rng.normal(tf.shape(y)), -0.5, 0.5)
            next_a, next_logp = self.sticks(tf.clip_by_value(tf.tanh(y) + noise, -1.0, 1.0)), None
        next_q = tf.reduce_min(self.target_heads([next_features, next_a, next_ctx], training=False), axis=-1)
        y = td_targets(batch["reward"], batch["discount"], next_q, next_logp)  # alpha is inside next_logp
        features = self.encoder(obs, training=True)
        q = self.heads([features, batch["action"], batch["ctx"]], training=True)
        loss = tf.reduce_mean(tf.square(q - y[:, None]))
        return loss, features, {"critic_loss": loss, "q_target": tf.reduce_mean(y), "reward": tf.reduce_mean(batch["reward"])}

    @staticmethod
    def _apply(opt: keras.optimizers.Optimizer, tape: tf.GradientTape, loss: tf.Tensor, variables: list,
               clip: float, name: str) -> tf.Tensor:
        checked = tf.debugging.check_numerics(loss, f"{name} loss is NaN/Inf")
        grads = tape.gradient(loss, variables)
        with tf.control_dependencies([checked]):
            grads, norm = tf.clip_by_global_norm(grads, clip)
            norm = tf.debugging.check_numerics(norm, f"{name} gradient norm is NaN/Inf")
        with tf.control_dependencies([norm]):
            opt.apply_gradients(zip(grads, variables, strict=True))
        return norm

    def _critic_step(self, batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor, dict[str, tf.Tensor]]:
        """One critic update; returns the (shifted) observations it saw, their features, and metrics."""
        obs = self.augment(batch["obs"])
        with tf.GradientTape() as tape:
            loss, features, metrics = self.critic_loss(batch, obs)
        metrics["critic_grad_norm"] = self._apply(self.critic_opt, tape, loss, self.critic_vars, self.config.clip_norm, "critic")
        metrics.update(self.novelty.train(batch["obs"], batch["action"], batch["next_obs"]))
        tau = self.config.tau
        for src, dst in ((self.encoder, self.target_encoder), (self.heads, self.target_heads)):
            for s, d in zip(src.trainable_variables, dst.trainable_variables, strict=True):
                d.assign(tau * s + (1.0 - tau) * d)
        self.updates.assign_add(1)
        return obs, features, metrics

    def _train_step(self, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        # The actor sees the pictures the critic was just fitted on (shifted, when augmenting).
        obs, features, metrics = self._critic_step(batch)
        with tf.GradientTape() as tape:
            loss, actor_metrics = self.actor_loss(obs, batch["ctx"], features)
        logp_axes = actor_metrics.pop("logp_axes")
        metrics.update(actor_metrics)
        metrics["actor_grad_norm"] = self._apply(self.actor_opt, tape, loss, self.actor.trainable_variables,
                                                 self.config.clip_norm, "actor")
        if self.config.algo == "sac":
            target = self.config.target_entropy / ACTION_DIM
            with tf.GradientTape() as tape:
                alpha_loss = -tf.reduce_sum(self.log_alpha * tf.stop_gradient(logp_axes + target))
            self._apply(self.alpha_opt, tape, alpha_loss, [self.log_alpha], self.config.clip_norm, "alpha")
            metrics["alpha"] = tf.reduce_mean(self.alpha())
        return metrics

    def train(self, batch: dict[str, np.ndarray]) -> dict[str, tf.Tensor]:
        """One update (critics, actor unless TD3 delays it, entropy weight, novelty model, targets)."""
        tensors = {k: tf.convert_to_tensor(v) for k, v in batch.items()}
        try:
            if self.config.algo == "td3" and int(self.updates.numpy()) % self.config.td3_policy_delay:
                return self._critic_only(tensors)[2]
            return self._step(tensors)
        except tf.errors.InvalidArgumentError as err:
            if "NaN/Inf" in str(err):
                raise NonFiniteLossError(f"training diverged after {int(self.updates.numpy())} updates: "
                                         f"{err.message.splitlines()[0]}") from err
            raise

    def policy(self, obs: tf.Tensor, ctx: tf.Tensor) -> tuple[np.ndarray, np.ndarray]:
        mean, log_std = self._policy(obs, ctx)
        return mean.numpy()[0], log_std.numpy()[0]

    def acting_copy(self) -> keras.Model:
        """A second actor with the trained actor's weights, and :meth:`policy` switched to it.

        Live mode acts with this copy on the control thread while the learner
        thread trains the original; new weights reach the copy only through
        ``copy.set_weights(snapshot)`` on the control thread, between two
        actions, so an action never sees half-updated weights.
        """
        encoder = build_encoder(self.obs_shape, self.config, self.config.seed + 200, "acting_encoder")
        copy = self._build_policy(encoder)[1]
        copy.set_weights(self.policy_net.get_weights())
        spec = [tf.TensorSpec([1, *self.obs_shape], tf.uint8), tf.TensorSpec([1, self.ctx_dim], tf.float32)]
        fn = lambda obs, ctx: self._policy_out(obs, ctx, copy)  # noqa: E731
        self._policy = fn if self.config.eager else tf.function(fn, input_signature=spec)
        if not self.config.eager:
            self._policy.get_concrete_function()
        return copy

    def dummy_batch(self, seed: int = 0) -> dict[str, tf.Tensor]:
        rng = np.random.default_rng(seed)
        out = {}
        for k, s in self._spec.items():
            shape = s.shape.as_list()
            out[k] = tf.constant(rng.integers(0, 256, shape, dtype=np.uint8) if s.dtype == tf.uint8
                                 else rng.uniform(0, 1, shape).astype(np.float32))
        return out

    def check_path(self) -> None:
        """Refuse to start when an actor or critic weight gets no usable gradient (see :mod:`explorer.agent.guard`)."""
        batch = self.dummy_batch()
        features = self.encoder(batch["obs"], training=False)
        report = check_gradients(lambda: self.actor_loss(batch["obs"], batch["ctx"], features)[0],
                                 self.actor.trainable_variables)
        if not report.ok:
            raise GradientPathError(f"actor loss -> policy weights:\n{report}")
        report = check_gradients(lambda: self.critic_loss(batch)[0], self.critic_vars)
        if not report.ok:
            raise GradientPathError(f"critic loss -> critic weights:\n{report}")

    def warm_up(self) -> None:
        """Trace every compiled function now, so nothing traces while the game runs."""
        if self.config.eager:
            return
        self._step.get_concrete_function()
        self._critic_only.get_concrete_function()
        self._policy.get_concrete_function()

    def checkpoint_items(self) -> dict[str, Any]:
        return {"actor": self.actor, "encoder": self.encoder, "heads": self.heads, "target_encoder": self.target_encoder,
                "target_heads": self.target_heads, "log_alpha": self.log_alpha, "actor_opt": self.actor_opt,
                "critic_opt": self.critic_opt, "alpha_opt": self.alpha_opt, "updates": self.updates, "rng": self.rng,
                "novelty": tf.train.Checkpoint(**self.novelty.checkpoint_items())}


# ---------------------------------------------------------------- agent

@dataclass
class _Decision:
    """One decision of the actor while it is held: where it started and the novelty summed so far."""

    ids: np.ndarray
    action: np.ndarray
    ctx: np.ndarray
    ret: float = 0.0
    steps: int = 0


class LearningAgent:
    """The exploring agent: acts with the actor plus time-correlated noise, learns on-line from novelty.

    Args:
      learner_config: :class:`LearnerConfig`.
      novelty_config: :class:`NoveltyConfig`.
      obs_shape: ``(k, H, W, C)`` of the observations handed to :meth:`act`.
      episode_steps: agent steps per episode (the step fraction is a context input); 0 if unknown.
    """

    def __init__(self, learner_config: LearnerConfig, novelty_config: NoveltyConfig,
                 obs_shape: tuple[int, int, int, int], episode_steps: int = 0):
        k, h, w, c = (int(s) for s in obs_shape)
        self.config = learner_config
        self.stack, self.frame_shape = k, (h, w, c)
        self.episode_steps = int(episode_steps)
        self.ctx_dim = ACTION_DIM + 3 if learner_config.context else 1
        stacked = (h, w, k * c)
        self.novelty = make_novelty(novelty_config, self.frame_shape, k)
        self.learner = Learner(learner_config, self.novelty, stacked, self.ctx_dim)
        self.replay = Replay(self.frame_shape, k, self.ctx_dim, learner_config.replay_mb, learner_config.seed)
        self.rng = np.random.default_rng(learner_config.seed + 2)
        self.noise = self.rng.normal(size=ACTION_DIM).astype(np.float32)
        self.steps = 0
        self.episode_step = 0
        self.prev_action = np.zeros(ACTION_DIM, np.float32)
        self.new_episode = True
        #: decisions waiting for their n-step return: (obs ids, action, summed novelty, context, discount)
        self.pending: deque[tuple[np.ndarray, np.ndarray, float, np.ndarray, float]] = deque()
        self.decision: _Decision | None = None  # the decision being held, summed step by step
        self.held: np.ndarray | None = None  # the action act() holds, and for how many steps it was returned
        self.held_steps = 0
        self.obs_ids: np.ndarray | None = None
        self.update_time = 0.0
        #: train inside :meth:`observe` every ``update_every`` steps; live mode turns this off
        #: and trains on a thread of its own (:class:`explorer.agent.threaded.ThreadedAgent`)
        self.train_inline = True
        self.last_reward = 0.0
        self.novelty_ema = np.ones(2, np.float32)

    # -- protocol
    def context(self, prev_action: np.ndarray, episode_step: int) -> np.ndarray:
        """What the agent knows beyond its frames: previous action, episode-step fraction, recent novelty.

        The novelty averages (over ~5 and ~20 steps) tell a feed-forward critic
        whether the episode has lately been going somewhere new.
        """
        if not self.config.context:
            return np.zeros(1, np.float32)
        frac = episode_step / self.episode_steps if self.episode_steps else 0.0
        return np.concatenate([prev_action, [frac], self.novelty_ema]).astype(np.float32)

    def _stack(self, obs: Any) -> np.ndarray:
        o = np.asarray(obs, np.uint8)  # [k, H, W, C]
        k, h, w, c = o.shape
        return o.transpose(1, 2, 0, 3).reshape(h, w, k * c)

    def act(self, obs: Any) -> np.ndarray:
        """``uint8[k, H, W, C]`` -> ``float32[4]`` in [action_low, action_high], exploration noise included.

        The actor decides every ``action_repeat`` steps; in between, the decision is held.
        """
        if self.new_episode:
            self.prev_action = np.zeros(ACTION_DIM, np.float32)
            self.episode_step = 0
            self.novelty_ema = np.ones(2, np.float32)
            self.held = None
        c = self.config
        if self.held is not None and self.held_steps < c.action_repeat:
            self.held_steps += 1
            return self.held.copy()
        rho = c.noise_rho
        self.noise = (rho * self.noise + np.sqrt(1 - rho**2) * self.rng.normal(size=ACTION_DIM)).astype(np.float32)
        if self.steps < c.warmup_steps:
            a = np.clip(self.noise + self.learner.sticks.prior, -1.0, 1.0)
        else:
            ctx = self.context(self.prev_action, self.episode_step)
            mean, log_std = self.learner.policy(tf.constant(self._stack(obs)[None]), tf.constant(ctx[None]))
            if c.algo == "sac":
                a = np.tanh(mean + np.exp(log_std) * self.noise)
            else:
                a = np.clip(np.tanh(mean) + c.td3_noise * self.noise, -1.0, 1.0)
        self.held, self.held_steps = self.learner.sticks(a).astype(np.float32), 1
        return self.held.copy()

    def observe(self, obs: Any, action: Any, next_obs: Any, first: bool, last: bool) -> dict[str, float]:
        """Record one step, compute its novelty, and train every ``update_every`` steps.

        Steps add up to decisions: a decision ends after ``action_repeat`` steps, at
        the end of an episode, or when the action changes (recorded sessions, a
        shorter hold); each decision is one replayed transition.
        """
        c = self.config
        action = np.asarray(action, np.float32)
        obs_s, next_s = self._stack(obs), self._stack(next_obs)
        if first or self.obs_ids is None:
            self.episode_step = 0
            self.prev_action = np.zeros(ACTION_DIM, np.float32)
            self.novelty_ema = np.ones(2, np.float32)
            self.pending.clear()
            self.decision = None
            self.novelty.reset(tf.constant(obs_s))
            self.obs_ids = np.array([self.replay.push_frame(f) for f in np.asarray(obs, np.uint8)])
        reward = float(self.novelty.reward(tf.constant(obs_s), tf.constant(action), tf.constant(next_s)))
        self.last_reward = reward
        new_id = self.replay.push_frame(np.asarray(next_obs, np.uint8)[-1])
        next_ids = np.append(self.obs_ids[1:], new_id)
        if self.decision is not None and not np.array_equal(action, self.decision.action):
            self._end_decision(self.obs_ids, self.context(self.prev_action, self.episode_step), last=False)
        if self.decision is None:
            self.decision = _Decision(self.obs_ids, action, self.context(self.prev_action, self.episode_step))
        d = self.decision
        d.ret += c.gamma**d.steps * reward
        d.steps += 1
        self.novelty_ema = (_EMA_RATES * self.novelty_ema + (1 - _EMA_RATES) * reward).astype(np.float32)
        if d.steps >= c.action_repeat or last:
            self._end_decision(next_ids, self.context(action, self.episode_step + 1), last)
        self.obs_ids = next_ids
        self.prev_action = action
        self.episode_step += 1
        self.steps += 1
        self.new_episode = bool(last)
        if last:
            self.obs_ids = None
        metrics: dict[str, float] = {"novelty": reward}
        if self.train_inline and self.ready_to_train() and self.steps % c.update_every == 0:
            metrics.update(self.train_once())
        return metrics

    def _end_decision(self, next_ids: np.ndarray, next_ctx: np.ndarray, last: bool) -> None:
        """Queue the open decision; write n-step transitions once ``n_step`` decisions wait (all at the end)."""
        c = self.config
        d, self.decision = self.decision, None
        assert d is not None
        self.pending.append((d.ids, d.action, d.ret, d.ctx, c.gamma**d.steps))
        if len(self.pending) == c.n_step or last:
            while self.pending:
                ret, disc = 0.0, 1.0
                for p in self.pending:
                    ret += disc * p[2]
                    disc *= p[4]
                ids, a, _, cx, _ = self.pending.popleft()
                self.replay.add(ids, a, ret, 0.0 if last else disc, next_ids, cx, next_ctx)
                if not last:
                    break

    def ready_to_train(self) -> bool:
        """Past the warm-up, with a batch's worth of transitions in the replay."""
        return self.steps >= self.config.warmup_steps and len(self.replay) >= self.config.batch_size

    def train_once(self) -> dict[str, float]:
        """One update from a replay sample (the learner thread's step in live mode)."""
        t0 = time.perf_counter()
        out = self.learner.train(self.replay.sample(self.config.batch_size))
        self.update_time += time.perf_counter() - t0
        return {k: float(v) for k, v in out.items()}

    def close(self) -> None:
        self.pending.clear()

    # -- checkpoints (written and read by explorer.agent.checkpoint.Checkpointer, with learner.checkpoint_items())
    def save_state(self, directory: str | Path) -> None:
        """What lives outside TensorFlow: ``replay.npz`` and ``agent.json`` (each written, then renamed in)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        with self.replay.lock:
            replay: dict[str, Any] = self.replay.state()
            tmp = d / "replay.tmp.npz"
            np.savez(tmp, **replay)
        tmp.replace(d / "replay.npz")
        state = {"steps": self.steps, "episode_step": self.episode_step, "prev_action": self.prev_action.tolist(),
                 "new_episode": self.new_episode, "noise": self.noise.tolist(),
                 "rng": self.rng.bit_generator.state, "replay_rng": self.replay.rng.bit_generator.state,
                 "obs_ids": None if self.obs_ids is None else self.obs_ids.tolist(),
                 "novelty_ema": self.novelty_ema.tolist(),
                 "pending": [(p[0].tolist(), p[1].tolist(), p[2], p[3].tolist(), p[4]) for p in self.pending],
                 "decision": None if self.decision is None else {
                     "ids": self.decision.ids.tolist(), "action": self.decision.action.tolist(),
                     "ctx": self.decision.ctx.tolist(), "ret": self.decision.ret, "steps": self.decision.steps},
                 "held": None if self.held is None else self.held.tolist(), "held_steps": self.held_steps}
        (d / "agent.tmp.json").write_text(json.dumps(state))
        (d / "agent.tmp.json").replace(d / "agent.json")

    def restore_state(self, directory: str | Path) -> None:
        """Load what :meth:`save_state` wrote."""
        d = Path(directory)
        with np.load(d / "replay.npz", allow_pickle=False) as z:
            self.replay.load(dict(z))
        s = json.loads((d / "agent.json").read_text())
        self.steps, self.episode_step, self.new_episode = s["steps"], s["episode_step"], s["new_episode"]
        self.prev_action = np.array(s["prev_action"], np.float32)
        self.noise = np.array(s["noise"], np.float32)
        self.novelty_ema = np.array(s["novelty_ema"], np.float32)
        self.rng.bit_generator.state = s["rng"]
        self.replay.rng.bit_generator.state = s["replay_rng"]
        self.obs_ids = None if s["obs_ids"] is None else np.array(s["obs_ids"], np.int64)
        gamma = self.config.gamma  # checkpoints from before action_repeat: one step per decision
        self.pending = deque((np.array(p[0], np.int64), np.array(p[1], np.float32), p[2], np.array(p[3], np.float32),
                              p[4] if len(p) > 4 else gamma) for p in s["pending"])
        d = s.get("decision")
        self.decision = None if d is None else _Decision(np.array(d["ids"], np.int64), np.array(d["action"], np.float32),
                                                         np.array(d["ctx"], np.float32), d["ret"], d["steps"])
        self.held = None if s.get("held") is None else np.array(s["held"], np.float32)
        self.held_steps = s.get("held_steps", 0)

def build_agent(learner_config: LearnerConfig, novelty_config: NoveltyConfig,
                obs_shape: tuple[int, int, int, int], episode_steps: int = 0) -> LearningAgent:
    """The learning agent for observations ``uint8[k, H, W, C]`` (see :class:`LearningAgent`)."""
    return LearningAgent(learner_config, novelty_config, obs_shape, episode_steps)
