"""The builder: the agent's parts made from the config, in one place.

:func:`build_agent` makes the learning agent's novelty signal, context,
replay, adder, learner and actor, wired as every mode uses them;
:func:`build_actor` makes the actor ``run.agent`` names (the learning agent or
a random baseline). Modes pick what they need from the result.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer.agent.actor import LearningActor, RandomActor
from explorer.agent.adder import NStepAdder, TransitionSink
from explorer.agent.checkpoint import ArraysPart, Checkpointer, JsonPart, Part, validate_rng_state
from explorer.agent.context import Context, Proposal
from explorer.agent.learner import Learner
from explorer.agent.networks import (
    StickRange,
    build_encoder,
    build_heads,
    build_model_head,
    build_policy_net,
)
from explorer.agent.novelty import EpisodicNovelty, Novelty, make_novelty
from explorer.agent.replay import Replay
from explorer.config import Config, turn_rate
from explorer.core import Actor, ExplorerError, action_dim


@dataclass
class Agent:
    """The learning agent's parts."""

    actor: LearningActor
    learner: Learner
    replay: Replay
    adder: NStepAdder
    novelty: Novelty
    context: Context
    config: Config | None = None  # the settings it was built from (to explain a checkpoint that does not fit)

    def checkpointer(self, directory: str | Path) -> Checkpointer:
        """Checkpoints of every part: networks, optimisers and novelty model (TensorFlow); the actor's and
        the adder's state, the replay and its sampler (files of their own beside it)."""
        import tensorflow as tf

        tf_items: dict[str, Any] = {**self.learner.checkpoint_items(),
                                    "novelty": tf.train.Checkpoint(**self.novelty.checkpoint_items())}
        replay = self.replay

        def sampler(state: Any) -> None:
            replay.rng.bit_generator.state = state

        parts: dict[str, Part] = {
            "actor": JsonPart(self.actor.state, self.actor.load, check=self.actor.check_state,
                              validate=self.actor.validate_state, filename="actor.json"),
            "adder": JsonPart(self.adder.state, self.adder.load, validate=self.adder.validate_state,
                              filename="adder.json"),
            "replay": ArraysPart(replay.state, replay.load, check=replay.check, validate=replay.validate,
                                 filename="replay.npz", lock=replay.lock),
            "sampler": JsonPart(lambda: replay.rng.bit_generator.state, sampler,
                                validate=lambda s: validate_rng_state(s, "sampler state"), filename="sampler.json")}
        config = self.config
        run_config = Path(directory).parent / "config.toml"
        explain = None if config is None else (lambda: settings_differences(run_config, config))
        return Checkpointer(directory, tf_items, parts, explain=explain)


#: settings that shape the networks, the replay or the novelty model: a checkpoint fits only the same values
SHAPING_SETTINGS = ("pad.buttons", "observation.width", "observation.height", "observation.grayscale",
                    "observation.stack", "learner.algo", "learner.networks.hidden", "learner.networks.feature",
                    "learner.networks.filters", "learner.networks.shared_encoder", "learner.networks.context",
                    "learner.networks.view_strips", "learner.networks.echo_units", "learner.networks.recurrent_units",
                    "learner.networks.recurrent_window", "learner.schedule.replay_mb",
                    "novelty.signal", "novelty.embedding", "novelty.embed_dim", "novelty.histogram_bins",
                    "novelty.lifelong", "novelty.episode_capacity", "novelty.pixel_window",
                    "novelty.heading_window")


def settings_differences(run_config: Path, config: Config) -> str | None:
    """Which of :data:`SHAPING_SETTINGS` differ between a run's ``config.toml`` and ``config``, with the
    ``--set`` that loads the run's values; None when there is no such file or none differs.

    Raises:
      ConfigError: the run's ``config.toml`` cannot be read.
    """
    import json

    from explorer.config import load

    if not run_config.is_file():
        return None
    theirs = load(run_config, [], run_file=True)
    changed = [k for k in SHAPING_SETTINGS if theirs.setting(k) != config.setting(k)]
    if not changed:
        return None
    said = "; ".join(f"{k} = {json.dumps(theirs.setting(k))} (the settings in use have {json.dumps(config.setting(k))})"
                     for k in changed)
    sets = " ".join(f"--set '{k}={json.dumps(theirs.setting(k))}'" for k in changed)
    return (f"its run ({run_config}) was trained with {said}; to continue it, leave out the --set or --config "
            f"that changed {'it' if len(changed) == 1 else 'them'}, or pass {sets}")



def build_agent(config: Config, frame_shape: tuple[int, int, int], *, acting_copy: bool = False,
                deterministic: bool = False) -> Agent:
    """The learning agent for frames ``uint8[H, W, C]`` stacked ``observation.stack`` deep.

    Args:
      config: the merged config (``learner``, ``novelty``, ``observation``; ``game.episode_steps``
        is the context's step horizon in every mode).
      frame_shape: ``(H, W, C)``.
      acting_copy: the actor acts with a copy of the policy network, updated only through
        ``set_weights`` (a learner on another thread trains the original); otherwise it acts
        with the learner's own network.
      deterministic: the actor acts without noise or warm-up (evaluation).
    """
    lc, k = config.learner, config.observation.stack
    h, w, c = (int(s) for s in frame_shape)
    buttons = config.pad.buttons
    novelty, context = _novelty_and_context(config, (h, w, c))
    replay = Replay((h, w, c), k, context.dim, lc.schedule.replay_mb, lc.seed, action_dim(buttons),
                    after=lc.action_repeat if lc.actions.plan_candidates and lc.actions.plan_score == "model" else 0)
    learner = Learner(lc, (h, w, k * c), context.dim, replay, novelty, buttons, context.proposal_at)
    adder = NStepAdder(replay, lc.gamma, lc.n_step)
    policy_net = learner.policy_net
    planner = learner.planner()
    if acting_copy:
        policy_net, planner = _policy_copy(config, (h, w, c), context.dim, novelty)
    actor = LearningActor(lc, policy_net, novelty, context, (k, h, w, c), adder=None if deterministic else adder,
                          deterministic=deterministic, buttons=buttons, tap_gap=config.pad.tap_gap, planner=planner,
                          turn_rate=turn_rate(config))
    if acting_copy:
        actor.set_weights(learner.get_weights())
    actor.warm_up()
    return Agent(actor, learner, replay, adder, novelty, context, config)


@dataclass
class ActingAgent:
    """The acting half alone, for a worker of ``explore --workers N``: no learner, no replay."""

    actor: LearningActor
    adder: NStepAdder
    novelty: Novelty
    context: Context


def build_acting(config: Config, frame_shape: tuple[int, int, int], sink: TransitionSink) -> ActingAgent:
    """An actor with a policy network of its own (weights arrive through ``set_weights``), its own
    novelty signal, context and noise, and an adder writing into ``sink`` (a worker's outbox).

    ``config.learner.seed`` seeds the noise: give each worker its own.
    """
    lc, k = config.learner, config.observation.stack
    h, w, c = (int(s) for s in frame_shape)
    novelty, context = _novelty_and_context(config, (h, w, c))
    adder = NStepAdder(sink, lc.gamma, lc.n_step)
    policy_net, planner = _policy_copy(config, (h, w, c), context.dim, novelty)
    actor = LearningActor(lc, policy_net, novelty, context, (k, h, w, c), adder=adder, buttons=config.pad.buttons,
                          tap_gap=config.pad.tap_gap, planner=planner, turn_rate=turn_rate(config))
    actor.warm_up()
    return ActingAgent(actor, adder, novelty, context)


def _novelty_and_context(config: Config, frame_shape: tuple[int, int, int]) -> tuple[Novelty, Context]:
    """The novelty signal and the context of an actor, for actions of ``pad.buttons``' layout."""
    dim = action_dim(config.pad.buttons)
    novelty = make_novelty(config.novelty, frame_shape, config.observation.stack, dim, turn_rate(config))
    lc = config.learner
    proposal = None
    if lc.actions.residual:  # drawn as sticky_prior draws, held option_steps decisions; its own seed in each worker
        proposal = Proposal(StickRange(lc, config.pad.buttons).prior, lc.actions.option_steps * lc.action_repeat,
                            lc.seed + 3)
    return novelty, Context(lc.networks.context, config.game.episode_steps, dim, lc.networks.view_strips,
                            config.novelty.histogram_bins, lc.networks.oracle_map, config.novelty.oracle_cell,
                            proposal, lc.networks.echo_units,
                            (lc.networks.recurrent_units, lc.networks.recurrent_window))


def _policy_copy(config: Config, frame_shape: tuple[int, int, int], ctx_dim: int,
                 novelty: Novelty) -> tuple[Any, tuple[Any, Any] | None]:
    """A policy network of its own for an actor, and with ``learner.actions.plan_candidates`` the planner's
    ``(encoder, model head)`` (its weights arrive through the actor's ``set_weights``)."""
    lc = config.learner
    h, w, c = frame_shape
    stacked = (h, w, config.observation.stack * c)
    dim = action_dim(config.pad.buttons)
    encoder = build_encoder(stacked, lc.networks.filters, lc.networks.feature, lc.seed + 200, "acting_encoder")
    policy_net = build_policy_net(stacked, ctx_dim, lc, encoder, dim)[1]
    if lc.actions.plan_candidates and lc.actions.plan_score == "critic":
        return policy_net, (encoder, build_heads(lc.networks.feature, ctx_dim, lc, lc.seed + 300, "acting_heads", dim))
    if not lc.actions.plan_candidates or lc.actions.plan_score == "reach" or not isinstance(novelty, EpisodicNovelty):
        return policy_net, None  # the reach prior is the actor's own (explorer.agent.reach)
    return policy_net, (encoder, build_model_head(lc.networks.feature, lc, int(novelty.embed.output_shape[-1]), dim))


def build_baseline(config: Config) -> Actor:
    """The random baseline ``run.agent`` names: ``random`` (uniform sticks every step), ``sticky``
    (held for ``run.sticky_steps``) or ``sticky_prior`` (held, moved by the prior, on the stick range);
    each presses the policy's buttons (``pad.buttons``) at random, half the time, as taps when
    ``pad.tap_gap`` says so."""
    run, buttons, gap = config.run, config.pad.buttons, config.pad.tap_gap
    if run.agent == "random":
        return RandomActor(run.seed, buttons=buttons, tap_gap=gap)
    if run.agent == "sticky":
        return RandomActor(run.seed, sticky_steps=run.sticky_steps, buttons=buttons, tap_gap=gap)
    if run.agent == "sticky_prior":
        return RandomActor(run.seed, sticky_steps=run.sticky_steps, sticks=StickRange(config.learner, buttons),
                           tap_gap=gap)
    raise ValueError(f"run.agent = {run.agent!r} is not a baseline")


def configure_threads(threads: tuple[int, int]) -> None:
    """Size TensorFlow's inter-op and intra-op thread pools (``run.threads``).

    An inter-op size of 0 keeps TensorFlow's choice (one thread per core); an intra-op size of 0
    gives each op one thread, so independent ops run side by side (measured faster on 2 cores,
    see ``run.threads``). Only possible before TensorFlow runs its first operation: later calls
    that would change a pool to a size asked for raise :class:`~explorer.core.ExplorerError`; the
    one-thread-per-op choice is then left out (explorer used inside a program that started
    TensorFlow keeps that program's pools).
    """
    import tensorflow as tf

    inter, intra = threads
    try:
        if inter:
            tf.config.threading.set_inter_op_parallelism_threads(inter)
        if intra:
            tf.config.threading.set_intra_op_parallelism_threads(intra)
    except RuntimeError as err:
        if (inter and tf.config.threading.get_inter_op_parallelism_threads() != inter) or \
                (intra and tf.config.threading.get_intra_op_parallelism_threads() != intra):
            raise ExplorerError(f"run.threads = {list(threads)} cannot be applied: TensorFlow has already started "
                                f"in this process ({err})") from err
    if not intra:
        with contextlib.suppress(RuntimeError):  # TensorFlow has started: its pools stay as they are
            tf.config.threading.set_intra_op_parallelism_threads(1)


def seed_everything(seed: int, eager: bool = False) -> None:
    """Seed Python, numpy and TensorFlow (``keras.utils.set_random_seed``); ``eager`` runs tf.functions eagerly."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(seed)
    if eager:
        tf.config.run_functions_eagerly(True)
