"""Novelty signals: how new a frame is, computed in TensorFlow from frames.

Every signal has one interface, :class:`Novelty`. Observations are stacked
frames ``uint8[H, W, k*C]`` (oldest first along channels); the signal looks at
the newest frame ``obs[..., -C:]``. ``reward()`` is called once per agent step,
in order, and may update episode memory and running normalisers; ``train()``
fits a learned model on a replay batch (a no-op for fixed signals). No signal
needs a gradient to the policy: the learner's critics carry that.

The math lives in pure functions (:func:`knn_distance`, :func:`pixel_difference`,
:func:`ema_update`) with hand-computed tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from explorer.config import NoveltyConfig
from explorer.core import N_AXES, ExplorerError

_EPS = 1e-8


# ---------------------------------------------------------------- pure math

def knn_distance(query: tf.Tensor, memory: tf.Tensor, count: tf.Tensor, k: int, exclude: int = 0,
                 among: tf.Tensor | None = None) -> tf.Tensor:
    """Mean Euclidean distance from ``query`` to its ``k`` nearest rows of memory.

    Args:
      query: ``float32[D]``.
      memory: ``float32[N, D]``, a ring: row ``i % N`` holds the ``i``-th entry written.
      count: scalar int, entries ever written; only the last ``min(count, N)`` exist.
      k: neighbours averaged; fewer are used while fewer are valid.
      exclude: the newest ``exclude`` entries are ignored, so that the distance
        measures "far from what was seen before", not "far from a moment ago".
      among: ``bool[N]``, the slots that may be neighbours (None: all); the others count as invalid.

    Returns:
      ``float32`` scalar; -1 when no entry is valid.
    """
    size = tf.shape(memory)[0]
    count = tf.cast(count, tf.int32)
    slots = tf.range(size)
    # global index of the entry in each slot (the newest write at or before count - 1)
    age = tf.math.floormod(count - 1 - slots, size)  # 0 = newest
    valid = (slots < count) & (age >= exclude)
    if among is not None:
        valid = valid & among
    d = tf.sqrt(tf.reduce_sum(tf.square(memory - query[None, :]), axis=1) + _EPS)
    d = tf.where(valid, d, tf.fill(tf.shape(d), float("inf")))
    n = tf.reduce_sum(tf.cast(valid, tf.int32))
    kk = tf.minimum(k, n)
    nearest = -tf.math.top_k(-d, k=kk).values
    return tf.cond(kk > 0, lambda: tf.reduce_mean(nearest), lambda: tf.constant(-1.0))


def knn_distances(queries: tf.Tensor, memory: tf.Tensor, count: tf.Tensor, k: int, exclude: int = 0) -> tf.Tensor:
    """:func:`knn_distance` of each row of ``queries`` (``float32[Q, D]``): ``float32[Q]``, each -1 when no
    entry is valid. Differentiable in ``queries``."""
    size = tf.shape(memory)[0]
    count = tf.cast(count, tf.int32)
    slots = tf.range(size)
    age = tf.math.floormod(count - 1 - slots, size)
    valid = (slots < count) & (age >= exclude)  # [N]
    d = tf.sqrt(tf.reduce_sum(tf.square(memory[None] - queries[:, None]), axis=-1) + _EPS)  # [Q, N]
    d = tf.where(valid[None], d, tf.fill(tf.shape(d), float("inf")))
    kk = tf.minimum(k, tf.reduce_sum(tf.cast(valid, tf.int32)))
    nearest = -tf.math.top_k(-d, k=kk).values  # [Q, kk]
    return tf.cond(kk > 0, lambda: tf.reduce_mean(nearest, -1), lambda: -tf.ones(tf.shape(queries)[:1]))


def running_quantile(history: tf.Tensor, count: tf.Tensor, q: float) -> tf.Tensor:
    """The ``q`` quantile (lower value, no interpolation) of the valid entries of a ring of scalars.

    Args:
      history: ``float32[N]``, a ring; count: entries ever written (only ``min(count, N)`` are valid).

    Returns:
      ``float32`` scalar; 0 when nothing is valid.
    """
    n = tf.minimum(tf.cast(count, tf.int32), tf.shape(history)[0])
    ordered = tf.sort(history[:n])
    index = tf.cast(tf.floor(q * tf.cast(n - 1, tf.float32)), tf.int32)
    return tf.cond(n > 0, lambda: ordered[tf.maximum(index, 0)], lambda: tf.constant(0.0))


def ring_write(ring: tf.Variable, count: tf.Variable, value: tf.Tensor, beside: tuple[tf.Variable, tf.Tensor] | None = None) -> None:
    """Write ``value`` into the next row of ``ring`` (row ``count % len(ring)``) and count it; with
    ``beside = (ring2, value2)`` write ``value2`` into the same row of a second ring of the same length."""
    slot = tf.cast(count % tf.cast(tf.shape(ring)[0], count.dtype), tf.int32)
    ring.scatter_nd_update([[slot]], value[None])
    if beside is not None:
        beside[0].scatter_nd_update([[slot]], beside[1][None])
    count.assign_add(1)


def angle_between(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """The unsigned difference of headings ``a`` and ``b`` (degrees, broadcast), in [0, 180]."""
    return tf.abs(tf.math.floormod(a - b + 180.0, 360.0) - 180.0)


def pixel_difference(frame: tf.Tensor, recent: tf.Tensor) -> tf.Tensor:
    """Mean absolute pixel difference of ``frame`` to each recent frame, averaged, in [0, 1].

    Args:
      frame: ``uint8[H, W, C]``.
      recent: ``uint8[W', H, W, C]``, ``W' >= 1`` frames.
    """
    f = tf.cast(frame, tf.float32)[None]
    r = tf.cast(recent, tf.float32)
    return tf.reduce_mean(tf.abs(f - r)) / 255.0


def ema_update(mean: tf.Tensor, var: tf.Tensor, x: tf.Tensor, decay: float, first: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """One step of an exponential running mean and variance; ``first`` starts them at ``x`` (and 0)."""
    new_mean = decay * mean + (1.0 - decay) * x
    new_var = decay * var + (1.0 - decay) * tf.square(x - mean)
    return (tf.where(first, x, new_mean), tf.where(first, tf.zeros_like(var), new_var))


def colour_histogram(frames: tf.Tensor, bins: int) -> tf.Tensor:
    """Square roots of the fractions of pixels in each of ``bins**C`` colour bins.

    ``frames`` is ``[..., H, W, C]`` with values 0-255; channel values are cut
    into ``bins`` equal ranges and a pixel's bin is the joint bin of its channels.
    The Euclidean distance between two results is the Hellinger distance (times
    sqrt 2) of the two colour distributions: it ignores where colours sit in the
    picture, so turning in place changes it little while walking into a room with
    other walls changes it a lot.
    """
    x = tf.convert_to_tensor(frames)
    channels = int(x.shape[-1])
    q = tf.minimum(tf.cast(x, tf.int32) * bins // 256, bins - 1)
    weights = tf.constant([bins ** (channels - 1 - c) for c in range(channels)], tf.int32)
    idx = tf.reduce_sum(q * weights, axis=-1)  # [..., H, W]
    lead = tf.shape(idx)[:-2]
    flat = tf.reshape(idx, [-1, tf.shape(idx)[-2] * tf.shape(idx)[-1]])
    n = bins ** channels
    counts = tf.math.bincount(flat, minlength=n, maxlength=n, axis=-1, dtype=tf.float32)
    fractions = counts / tf.cast(tf.shape(flat)[-1], tf.float32)
    return tf.reshape(tf.sqrt(fractions), tf.concat([lead, [n]], 0))


# ---------------------------------------------------------------- networks

class ColourHistogram(keras.layers.Layer):
    """:func:`colour_histogram` as a layer without weights."""

    def __init__(self, bins: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.bins = bins

    def call(self, frames: tf.Tensor) -> tf.Tensor:
        return colour_histogram(frames, self.bins)

    def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple[int | None, ...]:
        return (*input_shape[:-3], self.bins ** int(input_shape[-1] or 1))


def histogram_embedding(frame_shape: tuple[int, ...], bins: int, name: str) -> keras.Model:
    """A fixed embedding of one ``uint8[H, W, C]`` frame: its colour histogram."""
    x_in = keras.Input(frame_shape, dtype="uint8")
    return keras.Model(x_in, ColourHistogram(bins, name=f"{name}_histogram")(x_in), name=name)


def random_cnn(frame_shape: tuple[int, ...], seed: int, out: int | None, pooled: bool, name: str) -> keras.Model:
    """A small CNN on one ``uint8[H, W, C]`` frame (scaled to [0, 1]).

    ``pooled`` averages the last feature map over image columns, so a horizontal
    shift of the picture (turning in place) moves the features little; otherwise
    the map is flattened and projected to ``out`` features.
    """
    init = keras.initializers.Orthogonal(gain=1.4, seed=seed)
    x_in = keras.Input(frame_shape, dtype="uint8")
    x = keras.layers.Rescaling(1.0 / 255)(x_in)
    for i, f in enumerate((16, 32)):
        x = keras.layers.Conv2D(f, 3, strides=2, activation="relu", kernel_initializer=init, name=f"{name}_conv{i}")(x)
    if pooled:
        x = keras.layers.Flatten()(keras.layers.Lambda(lambda t: tf.reduce_mean(t, axis=2), name=f"{name}_colmean")(x))
    else:
        x = keras.layers.Flatten()(x)
        x = keras.layers.Dense(out or 64, kernel_initializer=keras.initializers.Orthogonal(seed=seed + 1), name=f"{name}_proj")(x)
    return keras.Model(x_in, x, name=name)


# ---------------------------------------------------------------- signals

class Novelty:
    """A novelty signal. Subclasses set ``name`` and override ``_raw`` (and ``train``)."""

    name = "base"

    def __init__(self, config: NoveltyConfig, frame_shape: tuple[int, int, int], stack: int,
                 action_dim: int = N_AXES):
        self.config = config
        self.action_dim = action_dim  # the four sticks and the policy's buttons
        self.frame_shape = tuple(int(s) for s in frame_shape)
        self.channels = self.frame_shape[-1]
        self.stack = stack
        obs_shape = (*self.frame_shape[:2], self.channels * stack)
        self.mean = tf.Variable(1.0, trainable=False, name="novelty_mean")
        self.var = tf.Variable(0.0, trainable=False, name="novelty_var")
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="novelty_steps")
        #: the last step's score before normalising: what the episodes of a run can be compared by (the
        #: normalised reward's mean is near 1 in every episode)
        self.raw = tf.Variable(0.0, trainable=False, name="novelty_raw")
        sig = [tf.TensorSpec(obs_shape, tf.uint8), tf.TensorSpec([action_dim], tf.float32), tf.TensorSpec(obs_shape, tf.uint8)]
        self._reward_fn = tf.function(self._reward, input_signature=sig, reduce_retracing=True)
        self._reset_fn = tf.function(self._reset, input_signature=[tf.TensorSpec(obs_shape, tf.uint8)])

    def newest(self, obs: tf.Tensor) -> tf.Tensor:
        """The newest frame of stacked observations (``[..., H, W, k*C]`` -> ``[..., H, W, C]``)."""
        return obs[..., -self.channels:]

    def reset(self, obs: tf.Tensor) -> None:
        """A new episode starts at ``obs`` (``uint8[H, W, k*C]``)."""
        self._reset_fn(obs)

    def reward(self, obs: tf.Tensor, action: tf.Tensor, next_obs: tf.Tensor) -> tf.Tensor:
        """Normalised novelty of ``next_obs`` (float32 scalar); updates memory and normalisers."""
        return self._reward_fn(obs, action, next_obs)

    def score(self, obs: tf.Tensor, action: Any, next_obs: tf.Tensor, info: Mapping[str, Any]) -> float:
        """The reward of one step as an actor scores it: :meth:`reward` of its frames. ``info`` is what
        the game reported with ``next_obs``; only a signal that reads it (the oracle) looks."""
        return float(self.reward(obs, tf.constant(action, tf.float32), next_obs))

    def train(self, obs: tf.Tensor, action: tf.Tensor, next_obs: tf.Tensor) -> dict[str, tf.Tensor]:
        """Fit the signal's learned model on a batch (called inside the learner's compiled step)."""
        return {}

    def checkpoint_items(self) -> dict[str, Any]:
        return {"mean": self.mean, "var": self.var, "steps": self.steps}

    def learned(self) -> list[keras.Model]:
        """The models :meth:`train` fits and :meth:`reward` reads (none for fixed signals): what a copy
        scoring novelty elsewhere (a worker of ``explore --workers N``) needs from the learner's."""
        return []

    def get_learned_weights(self) -> list[Any]:
        """Weights of :meth:`learned`, as ``numpy`` arrays, in a fixed order."""
        return [w.numpy() for model in self.learned() for w in model.weights]

    def set_learned_weights(self, weights: list[Any]) -> None:
        """Install weights from another copy's :meth:`get_learned_weights`."""
        variables = [w for model in self.learned() for w in model.weights]
        if len(variables) != len(weights):
            raise ValueError(f"{self.name} novelty has {len(variables)} learned weights, got {len(weights)}")
        for variable, value in zip(variables, weights, strict=True):
            variable.assign(value)

    def warm_up(self) -> None:
        """Trace the compiled reward and reset now, so nothing traces while a game runs."""
        self._reward_fn.get_concrete_function()
        self._reset_fn.get_concrete_function()

    def _reset(self, obs: tf.Tensor) -> None:
        pass

    def _raw(self, obs: tf.Tensor, action: tf.Tensor, next_obs: tf.Tensor) -> tf.Tensor:
        raise NotImplementedError

    def _normalise(self, raw: tf.Tensor) -> tf.Tensor:
        # Scale by the running mean, so a reward of 1 is "as new as usual".
        first = tf.equal(self.steps, 0)
        mean, var = ema_update(self.mean, self.var, raw, self.config.norm_decay, first)
        self.mean.assign(mean)
        self.var.assign(var)
        self.steps.assign_add(1)
        self.raw.assign(raw)
        return raw / (mean + _EPS)

    def _reward(self, obs: tf.Tensor, action: tf.Tensor, next_obs: tf.Tensor) -> tf.Tensor:
        return self._normalise(self._raw(obs, action, next_obs))


class Distillation:
    """Random network distillation: a predictor CNN, trained on frames, chases a fixed random CNN.

    Its error on a frame falls the more often frames like it were trained on: the
    ``rnd`` signal, and the lifelong factor of :class:`Lifelong`.
    """

    def __init__(self, frame_shape: tuple[int, ...], seed: int, dim: int, learning_rate: float, name: str):
        self.target = random_cnn(tuple(frame_shape), seed, dim, pooled=False, name=f"{name}_target")
        self.predictor = random_cnn(tuple(frame_shape), seed + 7, dim, pooled=False, name=f"{name}_predictor")
        self.optimizer = keras.optimizers.Adam(learning_rate)

    def errors(self, frames: tf.Tensor) -> tf.Tensor:
        """Squared prediction error per frame: ``uint8[B, H, W, C]`` -> ``float32[B]``."""
        return tf.reduce_mean(tf.square(self.predictor(frames, training=True)
                                        - tf.stop_gradient(self.target(frames, training=False))), axis=-1)

    def train(self, frames: tf.Tensor) -> tf.Tensor:
        """One Adam step of the predictor on ``frames``; returns the loss before it."""
        variables = self.predictor.trainable_variables
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(self.errors(frames))
        grads, _ = tf.clip_by_global_norm(tape.gradient(loss, variables), 10.0)
        self.optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss


class Lifelong:
    """Never Give Up's lifelong novelty: a factor in ``[1, L]`` on the episodic reward.

    :class:`Distillation` on the new frame; its error is standardised by a slow
    running mean and variance, and the factor is ``clip(1 + (error - mean) / std, 1, L)``.
    A place seen often over the whole run is predicted well and earns the episodic
    reward as is; one rarely seen earns up to ``L`` times more. The episodic part
    still says what is new in this episode; this part says which of it is new to
    the agent at all.
    """

    def __init__(self, config: NoveltyConfig, frame_shape: tuple[int, ...]):
        self.config = config
        self.rnd = Distillation(frame_shape, config.seed + 20, config.embed_dim, config.learning_rate, "lifelong")
        self.mean = tf.Variable(0.0, trainable=False, name="lifelong_mean")
        self.var = tf.Variable(0.0, trainable=False, name="lifelong_var")
        self.steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="lifelong_steps")

    def factor(self, frame: tf.Tensor) -> tf.Tensor:
        """The factor for one new frame ``uint8[H, W, C]``; updates the running statistics."""
        err = self.rnd.errors(frame[None])[0]
        first = tf.equal(self.steps, 0)
        mean, var = ema_update(self.mean, self.var, err, self.config.lifelong_decay, first)
        alpha = 1.0 + (err - self.mean) / tf.sqrt(self.var + _EPS)  # against the statistics before this frame
        self.mean.assign(mean)
        self.var.assign(var)
        self.steps.assign_add(1)
        return tf.where(first, 1.0, tf.clip_by_value(alpha, 1.0, self.config.lifelong_max))

    def train(self, frames: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"lifelong_loss": self.rnd.train(frames)}

    def checkpoint_items(self) -> dict[str, Any]:
        return {"lifelong_target": self.rnd.target, "lifelong_predictor": self.rnd.predictor,
                "lifelong_optimizer": self.rnd.optimizer, "lifelong_mean": self.mean, "lifelong_var": self.var,
                "lifelong_steps": self.steps}


class EpisodicNovelty(Novelty):
    """Never-Give-Up style: kNN distance of the new embedding to this episode's embeddings.

    With ``episodic_reward = "new_place"`` the memory holds only places: an
    embedding farther from all of them than the running quantile of such
    distances is a new place, earns 1 and is remembered; anything else earns 0
    (in the manner of Savinov et al., Episodic Curiosity through Reachability, 2019).

    With ``lifelong = "rnd"`` the reward is multiplied by :class:`Lifelong`'s factor
    (Never Give Up's episodic x lifelong product).

    With a ``turn_rate`` (degrees the view turns per step at full camera x) and
    ``heading_window`` degrees, the agent's heading is integrated from the camera x it sent,
    and a frame is compared only with the episode's frames seen facing within the window
    of it: a place seen before from another side is not new because its picture differs,
    and a picture is compared with what the same direction looked like elsewhere.
    """

    name = "episodic"

    def __init__(self, config: NoveltyConfig, frame_shape: tuple[int, int, int], stack: int,
                 action_dim: int = N_AXES, turn_rate: float = 0.0):
        if config.embedding == "histogram":
            self.embed = histogram_embedding(tuple(frame_shape), config.histogram_bins, name="episodic_embed")
        elif config.embedding == "reach":  # the reach prior's picture features: how open the view is, which way
            from explorer.agent.reach import FRAME, reach_features
            if tuple(frame_shape) != FRAME:
                raise ValueError(f"novelty.embedding = reach reads frames of {FRAME}, not {tuple(frame_shape)}")
            self.embed = reach_features()
        else:
            self.embed = random_cnn(tuple(frame_shape), config.seed, config.embed_dim,
                                    pooled=config.embedding == "pooled", name="episodic_embed")
        self.temporal = config.embedding == "temporal"
        if self.temporal:
            self.optimizer = keras.optimizers.Adam(config.learning_rate)
        dim = int(self.embed.output_shape[-1])
        self.memory = tf.Variable(tf.zeros([config.episode_capacity, dim]), trainable=False, name="episodic_memory")
        self.count = tf.Variable(0, dtype=tf.int64, trainable=False, name="episodic_count")
        self.turn_rate = float(turn_rate) if config.heading_window > 0 else 0.0
        self.facing: tf.Variable | None = None  # with a heading window: each memory row's heading, degrees
        if self.turn_rate > 0:
            self.facing = tf.Variable(tf.zeros([config.episode_capacity]), trainable=False, name="episodic_facing")
            self.heading = tf.Variable(0.0, trainable=False, name="episodic_heading")
        self.places = config.episodic_reward == "new_place"
        self.history = tf.Variable(tf.zeros([config.place_history]), trainable=False, name="place_history")
        self.history_count = tf.Variable(0, dtype=tf.int64, trainable=False, name="place_history_count")
        self.inverse: keras.Model | None = None
        if config.embedding == "inverse":
            self.inverse = keras.Sequential([
                keras.Input([2 * dim]),
                keras.layers.Dense(128, activation="relu", kernel_initializer=keras.initializers.GlorotUniform(config.seed + 2)),
                keras.layers.Dense(action_dim, activation="tanh",
                                   kernel_initializer=keras.initializers.GlorotUniform(config.seed + 3)),
            ], name="inverse_head")
            self.optimizer = keras.optimizers.Adam(config.learning_rate)
        self.lifelong = Lifelong(config, frame_shape) if config.lifelong == "rnd" else None
        super().__init__(config, frame_shape, stack, action_dim)

    def distances(self, queries: tf.Tensor) -> tf.Tensor:
        """``float32[Q]``: the kNN distance of each embedding of ``queries`` (``float32[Q, D]``) to this
        episode's memory, as the reward measures a new frame's (-1 while nothing is old enough)."""
        return knn_distances(queries, self.memory, self.count, self.config.knn, self.config.exclude_recent)

    def _embed(self, frame: tf.Tensor) -> tf.Tensor:
        e = self.embed(frame[None], training=False)[0]
        return tf.math.l2_normalize(e) if self.temporal else e

    def _add(self, e: tf.Tensor) -> None:
        ring_write(self.memory, self.count, e, None if self.facing is None else (self.facing, self.heading))

    def _turn(self, action: tf.Tensor) -> tf.Tensor | None:
        """Turn the heading by ``action``'s camera x; the memory rows facing within the window, or None."""
        if self.facing is None:
            return None
        self.heading.assign(tf.math.floormod(self.heading + action[0] * self.turn_rate, 360.0))
        return angle_between(self.facing, self.heading) < self.config.heading_window

    def _reset(self, obs: tf.Tensor) -> None:
        self.count.assign(0)
        if self.facing is not None:
            self.heading.assign(0.0)
        self._add(self._embed(self.newest(obs)))

    def _raw(self, obs: tf.Tensor, action: tf.Tensor, next_obs: tf.Tensor) -> tf.Tensor:
        among = self._turn(action)
        e = self._embed(self.newest(next_obs))
        d = knn_distance(e, self.memory, self.count, self.config.knn, self.config.exclude_recent, among)
        self._add(e)
        return d

    def _new_place(self, action: tf.Tensor, next_obs: tf.Tensor) -> tf.Tensor:
        among = self._turn(action)
        e = self._embed(self.newest(next_obs))
        d = knn_distance(e, self.memory, self.count, 1, among=among)
        threshold = running_quantile(self.history, self.history_count, self.config.place_quantile)
        ring_write(self.history, self.history_count, d)
        new = d > threshold

        def remember() -> tf.Tensor:
            self._add(e)
            return tf.constant(True)

        tf.cond(new, remember, lambda: tf.constant(False))
        self.steps.assign_add(1)
        return tf.cast(new, tf.float32)

    def _reward(self, obs: tf.Tensor, action: tf.Tensor, next_obs: tf.Tensor) -> tf.Tensor:
        if self.places:
            reward = self._new_place(action, next_obs)
            self.raw.assign(reward)
        else:
            raw = self._raw(obs, action, next_obs)
            # Early in an episode nothing is old enough to compare with: "as new as usual".
            reward = tf.cond(raw < 0, lambda: tf.constant(1.0), lambda: self._normalise(raw))
            self.raw.assign(tf.maximum(raw, 0.0))
        if self.lifelong is not None:
            reward = reward * self.lifelong.factor(self.newest(next_obs))
        return reward

    def train(self, obs: tf.Tensor, action: tf.Tensor, next_obs: tf.Tensor) -> dict[str, tf.Tensor]:
        metrics = self.lifelong.train(self.newest(next_obs)) if self.lifelong is not None else {}
        if self.temporal:
            return {**metrics, **self._train_temporal(obs, next_obs)}
        if self.inverse is None:
            return metrics
        variables = self.embed.trainable_variables + self.inverse.trainable_variables
        with tf.GradientTape() as tape:
            e0 = self.embed(self.newest(obs), training=True)
            e1 = self.embed(self.newest(next_obs), training=True)
            pred = self.inverse(tf.concat([e0, e1], -1), training=True)
            loss = tf.reduce_mean(tf.square(pred - action))
        grads = tape.gradient(loss, variables)
        grads, _ = tf.clip_by_global_norm(grads, 10.0)
        self.optimizer.apply_gradients(zip(grads, variables, strict=True))
        return {**metrics, "inverse_loss": loss}

    def _train_temporal(self, obs: tf.Tensor, next_obs: tf.Tensor) -> dict[str, tf.Tensor]:
        # Frames a few steps apart (obs and its n-step successor) are pulled together, other frames
        # of the batch pushed apart (InfoNCE): the embedding learns "reachable in a few steps",
        # so turning in place stays close while walking somewhere else moves away
        # (in the spirit of Savinov et al., Episodic Curiosity through Reachability, 2019).
        variables = self.embed.trainable_variables
        with tf.GradientTape() as tape:
            a = tf.math.l2_normalize(self.embed(self.newest(obs), training=True), axis=-1)
            b = tf.math.l2_normalize(self.embed(self.newest(next_obs), training=True), axis=-1)
            logits = tf.matmul(a, b, transpose_b=True) / 0.1
            labels = tf.range(tf.shape(a)[0])
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        grads, _ = tf.clip_by_global_norm(tape.gradient(loss, variables), 10.0)
        self.optimizer.apply_gradients(zip(grads, variables, strict=True))
        return {"temporal_loss": loss}

    def learned(self) -> list[keras.Model]:
        models = [self.embed] if self.temporal or self.inverse is not None else []
        return models + ([self.lifelong.rnd.predictor] if self.lifelong is not None else [])

    def checkpoint_items(self) -> dict[str, Any]:
        items = {**super().checkpoint_items(), "memory": self.memory, "count": self.count, "embed": self.embed,
                 "history": self.history, "history_count": self.history_count}
        if self.facing is not None:
            items.update(facing=self.facing, heading=self.heading)
        if self.lifelong is not None:
            items.update(self.lifelong.checkpoint_items())
        if self.temporal:
            items.update(optimizer=self.optimizer)
        if self.inverse is not None:
            items.update(inverse=self.inverse, optimizer=self.optimizer)
        return items


class PixelNovelty(Novelty):
    """The naive baseline: mean abs pixel difference of the new frame to the last frames."""

    name = "pixel"

    def __init__(self, config: NoveltyConfig, frame_shape: tuple[int, int, int], stack: int,
                 action_dim: int = N_AXES):
        self.recent = tf.Variable(tf.zeros([config.pixel_window, *frame_shape], tf.uint8), trainable=False, name="pixel_recent")
        self.count = tf.Variable(0, dtype=tf.int64, trainable=False, name="pixel_count")
        super().__init__(config, frame_shape, stack, action_dim)

    def _push(self, frame: tf.Tensor) -> None:
        ring_write(self.recent, self.count, frame)

    def _reset(self, obs: tf.Tensor) -> None:
        self.count.assign(0)
        self._push(self.newest(obs))

    def _raw(self, obs: tf.Tensor, action: tf.Tensor, next_obs: tf.Tensor) -> tf.Tensor:
        frame = self.newest(next_obs)
        n = tf.minimum(tf.cast(self.count, tf.int32), self.config.pixel_window)
        d = pixel_difference(frame, self.recent[:n])
        self._push(frame)
        return d

    def checkpoint_items(self) -> dict[str, Any]:
        return {**super().checkpoint_items(), "recent": self.recent, "count": self.count}


class RNDNovelty(Novelty):
    """Random network distillation: error of a trained predictor against a fixed random net."""

    name = "rnd"

    def __init__(self, config: NoveltyConfig, frame_shape: tuple[int, int, int], stack: int,
                 action_dim: int = N_AXES):
        self.rnd = Distillation(frame_shape, config.seed, config.embed_dim, config.learning_rate, "rnd")
        super().__init__(config, frame_shape, stack, action_dim)

    @property
    def predictor(self) -> keras.Model:
        """The trained predictor (what a copy elsewhere needs, see :meth:`learned`)."""
        return self.rnd.predictor

    def _raw(self, obs: tf.Tensor, action: tf.Tensor, next_obs: tf.Tensor) -> tf.Tensor:
        return self.rnd.errors(self.newest(next_obs)[None])[0]

    def train(self, obs: tf.Tensor, action: tf.Tensor, next_obs: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"rnd_loss": self.rnd.train(self.newest(next_obs))}

    def learned(self) -> list[keras.Model]:
        return [self.rnd.predictor]

    def checkpoint_items(self) -> dict[str, Any]:
        return {**super().checkpoint_items(), "target": self.rnd.target, "predictor": self.rnd.predictor,
                "optimizer": self.rnd.optimizer}


class ForwardNovelty(Novelty):
    """Forward-model error: predict the next frame's fixed random features from this frame's and the action."""

    name = "forward"

    def __init__(self, config: NoveltyConfig, frame_shape: tuple[int, int, int], stack: int,
                 action_dim: int = N_AXES):
        self.features = random_cnn(tuple(frame_shape), config.seed, config.embed_dim, pooled=False, name="forward_features")
        d = config.embed_dim
        self.model = keras.Sequential([
            keras.Input([d + action_dim]),
            keras.layers.Dense(256, activation="relu", kernel_initializer=keras.initializers.GlorotUniform(config.seed + 4)),
            keras.layers.Dense(d, kernel_initializer=keras.initializers.GlorotUniform(config.seed + 5)),
        ], name="forward_model")
        self.optimizer = keras.optimizers.Adam(config.learning_rate)
        super().__init__(config, frame_shape, stack, action_dim)

    def _error(self, obs: tf.Tensor, action: tf.Tensor, next_obs: tf.Tensor) -> tf.Tensor:
        f0 = self.features(self.newest(obs), training=False)
        f1 = tf.stop_gradient(self.features(self.newest(next_obs), training=False))
        pred = self.model(tf.concat([tf.stop_gradient(f0), action], -1), training=True)
        return tf.reduce_mean(tf.square(pred - f1), axis=-1)

    def _raw(self, obs: tf.Tensor, action: tf.Tensor, next_obs: tf.Tensor) -> tf.Tensor:
        return self._error(obs[None], action[None], next_obs[None])[0]

    def train(self, obs: tf.Tensor, action: tf.Tensor, next_obs: tf.Tensor) -> dict[str, tf.Tensor]:
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(self._error(obs, action, next_obs))
        grads, _ = tf.clip_by_global_norm(tape.gradient(loss, variables), 10.0)
        self.optimizer.apply_gradients(zip(grads, variables, strict=True))
        return {"forward_loss": loss}

    def learned(self) -> list[keras.Model]:
        return [self.model]

    def checkpoint_items(self) -> dict[str, Any]:
        return {**super().checkpoint_items(), "model": self.model, "optimizer": self.optimizer}


#: decay per agent step of the oracle's running rate of new cells (about two episodes of memory)
ORACLE_DECAY = 0.999


class OracleNovelty(Novelty):
    """A diagnosis, never a default: the novelty the coverage figures measure, read from the game.

    A step into a map cell (``oracle_cell`` map units square) that the episode has not stood in
    earns 1, any other step 0, divided by the running rate of such steps (decay ``ORACLE_DECAY`` per
    step, slower than the other signals' normaliser, whose 100-step mean of a rare event swings
    too far), so the reward's mean is near 1 as every signal's is. The position
    comes from the game's report (``info["position"]``, the built-in game's), which the agent
    never sees otherwise: learning on it tells how far a perfect reward takes a learner, apart
    from how well a picture-based signal tracks place. The episode's cells live in a Python set
    and restart with each episode (they are not in checkpoints: a resumed run's episode counts
    its cells afresh).
    """

    name = "oracle"

    def __init__(self, config: NoveltyConfig, frame_shape: tuple[int, int, int], stack: int,
                 action_dim: int = N_AXES):
        super().__init__(config, frame_shape, stack, action_dim)
        self.cells: set[tuple[int, int]] = set()

    def reset(self, obs: tf.Tensor) -> None:
        self.cells = set()

    def score(self, obs: tf.Tensor, action: Any, next_obs: tf.Tensor, info: Mapping[str, Any]) -> float:
        where = info.get("position")
        if where is None:
            raise ExplorerError("novelty.signal = oracle reads the player's position, which this game does not "
                                "report: use it with the built-in game (game.name = vizdoom or synthetic)")
        cell = (int(np.floor(where.x / self.config.oracle_cell)), int(np.floor(where.y / self.config.oracle_cell)))
        new = float(cell not in self.cells)
        self.cells.add(cell)
        first = int(self.steps.numpy()) == 0
        rate = new if first else ORACLE_DECAY * float(self.mean.numpy()) + (1.0 - ORACLE_DECAY) * new
        self.mean.assign(rate)
        self.steps.assign_add(1)
        self.raw.assign(new)
        return new / max(rate, 1e-3)

    def reward(self, obs: tf.Tensor, action: tf.Tensor, next_obs: tf.Tensor) -> tf.Tensor:
        raise ExplorerError("novelty.signal = oracle scores a step from the position the game reports, not from "
                            "frames alone: call score() with the step's info")

    def warm_up(self) -> None:
        pass


SIGNALS: dict[str, type[Novelty]] = {
    "episodic": EpisodicNovelty, "pixel": PixelNovelty, "rnd": RNDNovelty, "forward": ForwardNovelty,
    "oracle": OracleNovelty}


def make_novelty(config: NoveltyConfig, frame_shape: tuple[int, int, int], stack: int,
                 action_dim: int = N_AXES, turn_rate: float = 0.0) -> Novelty:
    """The signal ``config.signal`` for frames ``uint8[H, W, C]`` stacked ``stack`` deep and
    ``float32[action_dim]`` actions; ``turn_rate``: degrees the view turns per step at full camera x
    (0: unknown, so the episodic signal has no heading window)."""
    if config.signal == "episodic":
        return EpisodicNovelty(config, frame_shape, stack, action_dim, turn_rate)
    return SIGNALS[config.signal](config, frame_shape, stack, action_dim)
