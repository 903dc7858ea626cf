"""The surrogate learner: how a black-box novelty score reaches the policy's weights.

Novelty is computed from frames and has no gradient to the policy (the game is
in between). Twin critics ``Q(obs, a)`` are fitted by n-step temporal
difference to the novelty the agent observed, with target networks; the actor
climbs ``Q(obs, pi(obs))`` under a tape. The gradient runs loss -> Q -> a -> actor
weights, entirely in TensorFlow. :func:`explorer.agent.guard.check_gradients` checks
that path when the learner is built.

:class:`Learner` samples its replay and trains (:meth:`Learner.step`); the
acting half lives in :mod:`explorer.agent.actor` and gets the policy's weights
through :meth:`Learner.get_weights`::

    learner = Learner(LearnerConfig(), obs_shape=(64, 64, 9), ctx_dim=7, replay=replay)
    if learner.ready():
        metrics = learner.step()          # {"critic_loss": ..., "actor_loss": ..., ...}
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from explorer.agent.guard import GradientPathError, check_gradients
from explorer.agent.networks import (
    StickRange,
    build_core,
    build_encoder,
    build_heads,
    build_model_head,
    build_policy_net,
    core_width,
    corrected,
    split_outputs,
)
from explorer.agent.novelty import EpisodicNovelty, Novelty
from explorer.agent.replay import Replay
from explorer.config import LearnerConfig
from explorer.core import N_AXES, ExplorerError


class NonFiniteLossError(ExplorerError, FloatingPointError):
    """A loss or gradient became NaN/Inf during training."""


#: what an update checks for NaN/Inf, in the order it checks them; "<check> is NaN/Inf" is the error
CHECKS = ("critic loss", "critic gradient norm", "actor loss", "actor gradient norm", "alpha loss",
          "alpha gradient norm")


class FiniteChecks:
    """The NaN/Inf checks of one XLA-compiled update, which cannot raise from inside the cluster.

    XLA compiles ``tf.debugging.check_numerics`` away, so each check is recorded instead:
    :attr:`first` is 0 while every value checked so far was finite, else ``1 + `` the index in
    :data:`CHECKS` of the first one that was not. State changes after it are skipped (see
    :meth:`Learner._unless_nonfinite`) and :meth:`Learner.train` raises naming it.
    """

    def __init__(self) -> None:
        self.first = tf.constant(0, tf.int32)

    def check(self, name: str, value: tf.Tensor) -> None:
        bad = tf.logical_not(tf.reduce_all(tf.math.is_finite(value)))
        self.first = tf.where(tf.logical_and(self.ok(), bad), CHECKS.index(name) + 1, self.first)

    def ok(self) -> tf.Tensor:
        """Scalar bool: every value checked so far was finite."""
        return tf.equal(self.first, 0)


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


class Learner:
    """Twin critics with targets, an actor, (SAC) an entropy weight, and the compiled train step.

    Args:
      config: the learner section.
      obs_shape: ``(H, W, k*C)``, observations stacked along channels.
      ctx_dim: width of the context input.
      replay: what :meth:`step` samples.
      novelty: a novelty signal whose learned model (RND, forward, learned embeddings) is fitted
        on the same batches; None when the signal learns nothing.
    """

    def __init__(self, config: LearnerConfig, obs_shape: tuple[int, int, int], ctx_dim: int, replay: Replay,
                 novelty: Novelty | None = None, buttons: tuple[str, ...] = (), proposal_at: int | None = None):
        if config.actions.residual and proposal_at is None:
            raise ValueError("learner.actions.residual corrects the context's proposal: give where it starts (proposal_at)")
        self.config = config
        self.proposal_at = proposal_at
        self.novelty = novelty
        self.replay = replay
        self.obs_shape = tuple(obs_shape)
        self.ctx_dim = ctx_dim
        self.update_time = 0.0  # seconds spent in step(), sampling included
        self.sticks = StickRange(config, buttons)
        dim = self.sticks.dim
        self.encoder = self._encoder("critic_encoder")
        # learner.networks.recurrent_units: a GRU over the context's tail, trained by the critics' loss like
        # the encoder, read (held fixed) by the actor; the heads read its state instead of its inputs
        self.core = build_core(ctx_dim, config) if config.networks.recurrent_units else None
        self.target_core = build_core(ctx_dim, config, "target_core") if self.core is not None else None
        read_dim = core_width(ctx_dim, config)
        # The policy maps (obs, context) to the actor's outputs. With a shared encoder it is the
        # critic's encoder followed by the actor head, and the actor loss trains the head only.
        self.actor, self.policy_net = build_policy_net(self.obs_shape, ctx_dim, config, self.encoder, dim, self.core)
        self._prior_offset = self.sticks.prior_offset(config.algo, config.actions.residual)
        self.heads = build_heads(config.networks.feature, read_dim, config, config.seed + 300, "critic_heads", dim)
        # The planner's model (learner.actions.plan_candidates): the critic's encoder, then a head predicting the
        # novelty embedding of the frame one decision on; its loss trains the encoder too (an auxiliary task).
        self.plan_target: keras.Model | None = None
        self.model_head: keras.Model | None = None
        if config.actions.plan_candidates and config.actions.plan_score == "model":
            if not isinstance(novelty, EpisodicNovelty):
                raise ExplorerError("learner.actions.plan_candidates scores actions against the episodic novelty's memory: "
                                    "set novelty.signal = episodic")
            self.plan_target = novelty.embed
            out = int(novelty.embed.output_shape[-1])
            self.model_head = build_model_head(config.networks.feature, config, out, dim)
        self.target_encoder = self._encoder("target_encoder")
        self.target_heads = build_heads(config.networks.feature, read_dim, config, config.seed + 300, "target_heads", dim)
        for src, dst in self._targets():
            for s, d in zip(src.weights, dst.weights, strict=True):
                d.assign(s)
        # One entropy weight per axis: otherwise SAC can park all its entropy in an axis
        # that does nothing (camera y with look_scale 0) and act deterministically on the rest.
        self.log_alpha = tf.Variable(np.full(dim, np.log(config.init_alpha)), dtype=tf.float32, name="log_alpha")
        self.actor_opt = keras.optimizers.Adam(config.actor_lr)
        self.critic_opt = keras.optimizers.Adam(config.critic_lr)
        self.alpha_opt = keras.optimizers.Adam(config.alpha_lr)
        self.critic_vars = self.encoder.trainable_variables + self.heads.trainable_variables
        if self.core is not None:
            self.critic_vars += self.core.trainable_variables
        if self.model_head is not None:
            self.critic_vars += self.model_head.trainable_variables
        self.actor_opt.build(self.actor.trainable_variables)
        self.critic_opt.build(self.critic_vars)
        self.alpha_opt.build([self.log_alpha])
        self.updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="updates")
        self.rng = tf.random.Generator.from_seed(config.seed + 1)
        b = config.schedule.batch_size
        spec = {"obs": tf.TensorSpec([b, *self.obs_shape], tf.uint8), "action": tf.TensorSpec([b, dim], tf.float32),
                "reward": tf.TensorSpec([b], tf.float32), "discount": tf.TensorSpec([b], tf.float32),
                "next_obs": tf.TensorSpec([b, *self.obs_shape], tf.uint8), "ctx": tf.TensorSpec([b, ctx_dim], tf.float32),
                "next_ctx": tf.TensorSpec([b, ctx_dim], tf.float32)}
        if self.plan_target is not None:
            spec["after"] = tf.TensorSpec([b, *self.plan_target.input_shape[1:]], tf.uint8)
        self._spec = spec
        self._checks: FiniteChecks | None = None  # set while an XLA-compiled update traces
        # batch -> (metrics, first failed check): eager, a tf.function, or one XLA cluster
        self._step = self._compile(self._train_step)
        self._critic_only = self._compile(lambda batch: self._critic_step(batch)[2])
        self.check_path()
        self.warm_up()

    def _compile(self, update: Callable[[dict[str, tf.Tensor]], dict[str, tf.Tensor]]) -> Any:
        """``update`` (batch -> metrics) as a function of the batch returning ``(metrics, first)``.

        ``first`` is an int32 scalar: 0, or ``1 +`` the index in :data:`CHECKS` of the first
        non-finite value of an XLA-compiled update (the other ways raise from
        ``check_numerics`` and always return 0). Eager when ``config.eager``; typed loosely for that.
        """
        if self.config.eager or not self.config.xla:
            def plain(batch: dict[str, tf.Tensor]) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
                return update(batch), tf.constant(0, tf.int32)
            return plain if self.config.eager else tf.function(plain, input_signature=[self._spec])

        def checked(batch: dict[str, tf.Tensor]) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
            self._checks = FiniteChecks()
            try:
                metrics = update(batch)
                return metrics, self._checks.first
            finally:
                self._checks = None
        return tf.function(checked, input_signature=[self._spec], jit_compile=True)

    def _targets(self) -> list[tuple[keras.Model, keras.Model]]:
        """(network, its target) pairs: the encoder, the heads and the recurrent core when there is one."""
        pairs = [(self.encoder, self.target_encoder), (self.heads, self.target_heads)]
        if self.core is not None and self.target_core is not None:
            pairs.append((self.core, self.target_core))
        return pairs

    def read(self, ctx: tf.Tensor, target: bool = False) -> tf.Tensor:
        """The context as the heads read it: itself, or through the recurrent core (the target's with ``target``)."""
        core = self.target_core if target else self.core
        return ctx if core is None else core(ctx, training=False)

    def _encoder(self, name: str) -> keras.Model:
        c = self.config
        return build_encoder(self.obs_shape, c.networks.filters, c.networks.feature, c.seed + 200, name)

    def augment(self, obs: tf.Tensor) -> tf.Tensor:
        """Random shift of a batch of observations by up to ``config.networks.augment`` pixels (identity when 0)."""
        pad = self.config.networks.augment
        if not pad:
            return obs
        offsets = self.rng.uniform([2, tf.shape(obs)[0]], minval=0, maxval=2 * pad + 1, dtype=tf.int32)
        return shift_crop(obs, pad, offsets)

    # -- pieces used by the step and by the guard
    def alpha(self) -> tf.Tensor:
        return tf.exp(self.log_alpha) if self.config.algo == "sac" else tf.zeros([self.sticks.dim])

    def _with_prior(self, y: tf.Tensor) -> tf.Tensor:
        """The actor's outputs with ``atanh(prior)`` added to their pre-tanh means (the prior in squashed units)."""
        return y + self._prior_offset

    def _actor_out(self, obs: tf.Tensor, ctx: tf.Tensor, training: bool, features: tf.Tensor | None = None,
                   read: tf.Tensor | None = None) -> tf.Tensor:
        if not self.config.networks.shared_encoder:
            return self._with_prior(self.actor([obs, ctx], training=training))
        if features is None:
            features = self.encoder(obs, training=False)
        if read is None:
            read = self.read(ctx)
        return self._with_prior(self.actor([tf.stop_gradient(features), tf.stop_gradient(read)], training=training))

    def _sample(self, obs: tf.Tensor, ctx: tf.Tensor, training: bool, features: tf.Tensor | None = None,
                read: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Action as sent (sticks on their range, buttons 1 or -1 with a straight-through gradient), its
        per-axis log-prob ``[B, 4 + n]`` (SAC; zeros for TD3) and the pre-tanh mean.

        ``features``: the critic encoder's features of ``obs``, used (held fixed) by a shared-encoder actor;
        ``read``: the context through the recurrent core (:meth:`read`), held fixed likewise.
        """
        y = self._actor_out(obs, ctx, training, features, read)
        if self.config.algo == "sac":
            mean, log_std = split_outputs(y, "sac")
            a, logp = squash(mean, log_std, self.rng.normal(tf.shape(mean)))
            if self.config.actions.residual:  # the density of the correction, scaled by the residual
                logp -= float(np.log(self.config.actions.residual))
            return self.sent(self._corrected(a, ctx)), logp, mean
        return self.sent(self._corrected(tf.tanh(y), ctx)), tf.zeros_like(y), y

    def sent(self, squashed: tf.Tensor) -> tf.Tensor:
        """Squashed actions as the pad sends them (sticks on their range, buttons pressed or released)."""
        return self.sticks.press(self.sticks(squashed))

    def _corrected(self, squashed: tf.Tensor, ctx: tf.Tensor) -> tf.Tensor:
        """The policy's squashed outputs as the actions they stand for: themselves, or with
        ``learner.actions.residual`` the context's proposal corrected by them."""
        if not self.config.actions.residual:
            return squashed
        at = self.proposal_at
        assert at is not None
        return corrected(ctx[:, at:at + self.sticks.dim], squashed, self.config.actions.residual)

    def actor_loss(self, obs: tf.Tensor, ctx: tf.Tensor, features: tf.Tensor) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """``mean(alpha * log pi - min Q(obs, pi(obs))) + penalty * mean(pre-tanh^2)``; critics held fixed."""
        read = tf.stop_gradient(self.read(ctx))
        a, logp, mean = self._sample(obs, ctx, training=True, features=features, read=read)
        q = tf.reduce_min(self.heads([tf.stop_gradient(features), a, read], training=False), axis=-1)
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
            next_a, next_logp = self.sent(self._corrected(tf.clip_by_value(tf.tanh(y) + noise, -1.0, 1.0), next_ctx)), None
        next_read = self.read(next_ctx, target=True)
        next_q = tf.reduce_min(self.target_heads([next_features, next_a, next_read], training=False), axis=-1)
        y = td_targets(batch["reward"], batch["discount"], next_q, next_logp)  # alpha is inside next_logp
        features = self.encoder(obs, training=True)
        read = batch["ctx"] if self.core is None else self.core(batch["ctx"], training=True)
        q = self.heads([features, batch["action"], read], training=True)
        loss = tf.reduce_mean(tf.square(q - y[:, None]))
        metrics = {"critic_loss": loss, "q_target": tf.reduce_mean(y), "reward": tf.reduce_mean(batch["reward"])}
        if self.model_head is not None:
            model_loss = self.model_loss(features, batch)
            metrics["model_loss"] = model_loss
            loss = loss + self.config.actions.model_weight * model_loss
        return loss, features, metrics

    def model_loss(self, features: tf.Tensor, batch: dict[str, tf.Tensor]) -> tf.Tensor:
        """Squared error of the planner's predicted embedding of the frame one decision on (``batch["after"]``),
        summed over the embedding, averaged over the batch. The head predicts the change from the
        embedding of the observation's newest frame, so standing still is learnt at once."""
        assert self.model_head is not None and self.plan_target is not None
        channels = int(self.plan_target.input_shape[-1])
        now = self.plan_target(batch["obs"][..., -channels:], training=False)
        change = tf.stop_gradient(self.plan_target(batch["after"], training=False) - now)
        pred = self.model_head([features, batch["action"]], training=True)
        return tf.reduce_mean(tf.reduce_sum(tf.square(pred - change), -1))

    def _apply(self, opt: keras.optimizers.Optimizer, tape: tf.GradientTape, loss: tf.Tensor, variables: list,
               clip: float, name: str) -> tf.Tensor:
        if self._checks is not None:
            return self._apply_checked(self._checks, opt, tape, loss, variables, clip, name)
        checked = tf.debugging.check_numerics(loss, f"{name} loss is NaN/Inf")
        grads = tape.gradient(loss, variables)
        with tf.control_dependencies([checked]):
            grads, norm = tf.clip_by_global_norm(grads, clip)
            norm = tf.debugging.check_numerics(norm, f"{name} gradient norm is NaN/Inf")
        with tf.control_dependencies([norm]):
            opt.apply_gradients(zip(grads, variables, strict=True))
        return norm

    def _apply_checked(self, checks: FiniteChecks, opt: keras.optimizers.Optimizer, tape: tf.GradientTape,
                       loss: tf.Tensor, variables: list, clip: float, name: str) -> tf.Tensor:
        """:meth:`_apply` inside an XLA cluster: the loss and gradient norm are recorded in
        ``checks``, and the step is taken only while everything checked so far is finite."""
        checks.check(f"{name} loss", loss)
        grads, norm = tf.clip_by_global_norm(tape.gradient(loss, variables), clip)
        checks.check(f"{name} gradient norm", norm)
        self._unless_nonfinite(lambda: opt.apply_gradients(zip(grads, variables, strict=True)))
        return norm

    def _unless_nonfinite(self, change: Callable[[], object]) -> None:
        """Make a state change; in an XLA-compiled update only while every check so far passed."""
        if self._checks is None:
            change()
            return

        def run() -> None:
            change()
        tf.cond(self._checks.ok(), run, lambda: None)

    def _update_targets(self) -> None:
        """Polyak-average the target encoder and heads towards the critic's; count the update."""
        tau = self.config.tau
        for src, dst in self._targets():
            for s, d in zip(src.trainable_variables, dst.trainable_variables, strict=True):
                d.assign(tau * s + (1.0 - tau) * d)
        self.updates.assign_add(1)

    def _critic_step(self, batch: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor, dict[str, tf.Tensor]]:
        """One critic update; returns the (shifted) observations it saw, their features, and metrics."""
        obs = self.augment(batch["obs"])
        with tf.GradientTape() as tape:
            loss, features, metrics = self.critic_loss(batch, obs)
        metrics["critic_grad_norm"] = self._apply(self.critic_opt, tape, loss, self.critic_vars, self.config.clip_norm, "critic")
        if self.novelty is not None:
            metrics.update(self.novelty.train(batch["obs"], batch["action"], batch["next_obs"]))
        self._unless_nonfinite(self._update_targets)
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
            target = self.config.target_entropy / N_AXES  # per output, buttons included
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
                metrics, first = self._critic_only(tensors)
            else:
                metrics, first = self._step(tensors)
        except tf.errors.InvalidArgumentError as err:
            failed = [name for name in CHECKS if f"{name} is NaN/Inf" in err.message]
            if failed:  # the first failed check_numerics stops the step: one name
                raise self._diverged(failed[0]) from err
            raise
        if int(first):
            raise self._diverged(CHECKS[int(first) - 1])
        return metrics

    def _diverged(self, check: str) -> NonFiniteLossError:
        return NonFiniteLossError(f"training diverged after {int(self.updates.numpy())} updates: {check} is NaN/Inf")

    def ready(self) -> bool:
        """Replay holds a batch's worth of transitions."""
        return len(self.replay) >= self.config.schedule.batch_size

    def step(self, at: tuple[int, int] | None = None, margin: tuple[int, int] = (0, 0)) -> dict[str, float]:
        """Sample a batch from replay and train once; returns the update's metrics as floats.

        ``at`` and ``margin``: sample the replay as it was at that mark (see :meth:`Replay.sample`).
        """
        t0 = time.perf_counter()
        out = self.train(self.replay.sample(self.config.schedule.batch_size, at, margin))
        metrics = {k: float(v) for k, v in out.items()}
        self.update_time += time.perf_counter() - t0
        return metrics

    def get_weights(self) -> list[np.ndarray]:
        """The policy's weights (with a shared encoder, the critic's encoder's too), then the head the
        planner scores with when there is one (its model head, or the critics' heads), for an actor."""
        planner = self.planner()
        models = [self.policy_net] if planner is None else [self.policy_net, planner[1]]
        return [w.numpy() for m in models for w in m.weights]

    def planner(self) -> tuple[keras.Model, keras.Model] | None:
        """``(encoder, head)`` the actor's planner scores candidates with (``learner.actions.plan_candidates``):
        the model head, or with ``learner.actions.plan_score = "critic"`` the critics' heads; None without one
        (and with ``"reach"``, whose prior the actor holds itself)."""
        if not self.config.actions.plan_candidates or self.config.actions.plan_score == "reach":
            return None
        return self.encoder, (self.heads if self.config.actions.plan_score == "critic" else self.model_head)

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
        """Trace every compiled function now, so nothing traces (or compiles) while the game runs.

        An XLA cluster compiles on its first call, not when traced: each one used is called once
        on a dummy batch, and every variable it touched (weights, optimiser slots, the update
        count, random state) is put back as it was.
        """
        if self.config.eager:
            return
        for fn in (self._step, self._critic_only):
            variables = fn.get_concrete_function().variables
            if self.config.xla and (fn is self._step or self.config.algo == "td3"):
                saved = [v.numpy() for v in variables]
                fn(self.dummy_batch())
                for v, value in zip(variables, saved, strict=True):
                    v.assign(value)

    def checkpoint_items(self) -> dict[str, Any]:
        return {"actor": self.actor, "encoder": self.encoder, "heads": self.heads, "target_encoder": self.target_encoder,
                "target_heads": self.target_heads, "log_alpha": self.log_alpha, "actor_opt": self.actor_opt,
                "critic_opt": self.critic_opt, "alpha_opt": self.alpha_opt, "updates": self.updates, "rng": self.rng,
                **({} if self.model_head is None else {"model_head": self.model_head}),
                **({} if self.core is None else {"core": self.core, "target_core": self.target_core})}
