"""Actors: observation in, stick values out.

:class:`LearningActor` is the exploring agent's acting half: the policy plus
time-correlated noise, warm-up sticks, action repeat, the stick range and the
context input; it scores the novelty of what followed each action and hands the
step to its adder (when it has one). It never trains: weights arrive through
:meth:`LearningActor.set_weights` (or it shares the learner's model in one
process). :class:`RandomActor` is a baseline; :class:`RecordedActor` replays
the actions of a recorded session through a learning actor's scoring and adder.
"""

from __future__ import annotations

from typing import Annotated, Any

import keras
import numpy as np
import tensorflow as tf
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from explorer.agent.adder import NStepAdder
from explorer.agent.archive import ReturnMemory
from explorer.agent.checkpoint import first_error, validate_rng_state
from explorer.agent.context import Context
from explorer.agent.networks import StickRange, corrected, split_outputs
from explorer.agent.novelty import EpisodicNovelty, Novelty
from explorer.agent.place import PlaceMemory
from explorer.agent.reach import FRAME, Reach, load_reach
from explorer.agent.routes import PlaceMap
from explorer.config import LearnerConfig
from explorer.core import N_AXES, Step, settle, stack_frames
from explorer.taps import Taps

_Finite = Annotated[float, Field(allow_inf_nan=False)]
_Count = Annotated[int, Field(ge=0, lt=2**62)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class ViewState(_Strict):
    counts: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None
    frames: _Count
    value: list[_Finite]


class ProposalState(_Strict):
    action: list[Annotated[float, Field(ge=-1, le=1, allow_inf_nan=False)]]
    left: _Count
    rng: dict[str, Any]


class EchoState(_Strict):
    value: list[Annotated[float, Field(ge=-1, le=1, allow_inf_nan=False)]]


class ContextState(_Strict):
    prev_action: list[_Finite]
    episode_step: _Count
    novelty_ema: list[_Finite] = Field(min_length=2, max_length=2)
    view: ViewState | None = None
    proposal: ProposalState | None = None
    echo: EchoState | None = None
    recurrent: dict[str, Any] | None = None  # checked by RecurrentInput.check


class ActorState(_Strict):
    """What :meth:`LearningActor.state` writes (``actor.json`` of a checkpoint); lengths are checked apart."""

    buttons: list[str] | None = None  # absent in checkpoints written before it was kept
    steps: _Count
    new_episode: bool
    noise: list[_Finite] = Field(min_length=N_AXES)
    rng: dict[str, Any]
    context: ContextState
    held: list[_Finite] | None
    held_steps: _Count
    option: list[_Finite] | None = None
    option_left: _Count = 0
    tap_wait: list[_Count] | None = None


class LearningActor:
    """Acts with the policy network and exploration noise; scores novelty; feeds its adder.

    Args:
      config: the learner section (noise, warm-up, action repeat, stick range, algorithm).
      policy_net: ``(uint8[B, H, W, k*C], float32[B, ctx]) -> outputs`` Keras model. In one
        process with an inline learner it is the learner's own model; otherwise a copy that
        :meth:`set_weights` updates between decisions.
      novelty: scores each step (its episodic memory follows this actor's episodes).
      context: the context input, advanced here after each step.
      obs_shape: ``(k, H, W, C)`` of observations.
      adder: where steps go for learning; None acts and scores without storing (evaluation).
      deterministic: act with ``tanh(mean)`` on the stick range, no noise and no warm-up
        (evaluation).
      buttons: the pad buttons the policy holds (``pad.buttons``), one output each after the sticks.
      tap_gap: steps a held button stays released after each press (``pad.tap_gap``; 0: sent as held).
      planner: ``(encoder, model head)`` of the planner (``learner.actions.plan_candidates``): the encoder the
        policy reads and a head predicting the novelty embedding of the frame one decision on; its
        weights follow the policy's in :meth:`set_weights`.
      turn_rate: degrees the view turns per step at full camera x (``config.turn_rate``), for
        ``learner.actions.plan_memory``'s dead reckoning.
    """

    def __init__(self, config: LearnerConfig, policy_net: keras.Model, novelty: Novelty, context: Context,
                 obs_shape: tuple[int, int, int, int], adder: NStepAdder | None = None, deterministic: bool = False,
                 buttons: tuple[str, ...] = (), tap_gap: int = 0,
                 planner: tuple[keras.Model, keras.Model] | None = None, turn_rate: float = 0.0):
        self.config = config
        self.policy_net = policy_net
        self.planner = planner
        if planner is not None and config.actions.plan_score == "model" and not isinstance(novelty, EpisodicNovelty):
            raise ValueError("learner.actions.plan_candidates scores actions against the episodic novelty's memory")
        self.novelty = novelty
        self.context = context
        self.adder = adder
        # learner.actions.plan_score = reach: the reach prior (the shipped one, or reach_weights') scores the
        # planner's candidates
        self.reach = Reach(load_reach(config.actions.reach_weights or None), buttons) \
            if config.actions.plan_candidates and config.actions.plan_score == "reach" else None
        if self.reach is not None and tuple(obs_shape[1:]) != FRAME:
            raise ValueError(f"learner.actions.plan_score = reach reads frames of {FRAME}, not {tuple(obs_shape[1:])}")
        self.deterministic = deterministic
        # learner.actions.plan_memory: the episode's path, dead-reckoned, weighs the reach prior's candidates
        # (and with learner.actions.plan_route routes to the frontier of the ground it has walked)
        self.place = PlaceMemory(turn_rate, config.action_repeat, config.actions.plan_memory,
                                 config.actions.plan_route) \
            if self.reach is not None and (config.actions.plan_memory or config.actions.plan_route) \
            and not deterministic else None
        # learner.actions.return_share: the run's best episode, returned along before each episode explores
        self.memory = ReturnMemory(config.actions.return_share) \
            if config.actions.return_share and not deterministic else None
        # learner.actions.route_after: the episode's places from pixels, and routes to the least-visited
        self.map = PlaceMap(config.actions.route_after) if config.actions.route_after and not deterministic else None
        self.sticks = StickRange(config, buttons)
        self.taps = Taps(self.sticks.buttons, tap_gap)
        self._prior_offset = self.sticks.prior_offset(config.algo, config.actions.residual)
        if config.actions.residual and context.proposal_at is None:
            raise ValueError("learner.actions.residual corrects the context's proposal: give the context one")
        self.rng = np.random.default_rng(config.seed + 2)
        self.noise = self.rng.normal(size=self.sticks.dim).astype(np.float32)
        self.steps = 0
        self.new_episode = True
        self.held: np.ndarray | None = None  # the decision being held, and for how many steps it was returned
        self.held_steps = 0
        self.option: np.ndarray | None = None  # a random option's squashed action, and its decisions left
        self.option_left = 0
        self.started = False  # the last act() made a new decision
        self._sync_core()
        self.last_ctx = context.value()
        self.last_reward = 0.0
        k, h, w, c = obs_shape
        spec = [tf.TensorSpec([k, h, w, c], tf.uint8), tf.TensorSpec([context.dim], tf.float32)]
        self._policy: Any = self._outputs if config.eager else tf.function(self._outputs, input_signature=spec)
        self.kept_own: bool | None = None  # the last decision was planned: did it keep the policy's own action?
        # The model and reach planners score the policy's own action beside the draws; the critic planner the
        # draws alone (the actor climbs the critics, so its own action would win nearly every choice).
        self._own = config.actions.plan_score in ("model", "reach")
        plan_spec = [tf.TensorSpec([k, h, w, c], tf.uint8), tf.TensorSpec([config.actions.plan_candidates + self._own,
                                                                           self.sticks.dim], tf.float32),
                     tf.TensorSpec([context.dim], tf.float32)]
        self._plan_scores: Any = self._scores if config.eager else tf.function(self._scores, input_signature=plan_spec)
        # learner.actions.replan_below: what the reach prior expected of the held decision when it chose it, and
        # whether a newer frame has cut the hold short
        self.held_reach: float | None = None
        self.cut = False
        held_spec = [tf.TensorSpec([h, w, c], tf.uint8), tf.TensorSpec([1, self.sticks.dim], tf.float32)]
        self._held_score: Any = None
        if self.reach is not None and (config.actions.replan_below or self.place is not None):
            self._held_score = self.reach if config.eager else tf.function(self.reach.__call__, input_signature=held_spec)

    def _outputs(self, obs: tf.Tensor, ctx: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Ring frames to pre-tanh mean and log-std, in one compiled call."""
        y = self.policy_net([stack_frames(obs)[None], ctx[None]], training=False) + self._prior_offset
        mean, log_std = split_outputs(y, self.config.algo)
        return mean[0], log_std[0]

    def _scores(self, obs: tf.Tensor, actions: tf.Tensor, ctx: tf.Tensor) -> tf.Tensor:
        """``float32[K]``: how far from this episode's memory the planner expects the frame one decision
        on to be, for each of ``actions`` (``float32[K, dim]``, as sent) taken on ``obs`` in context
        ``ctx``; with ``learner.actions.plan_score = "critic"`` the lower of the twin critics' values instead, and
        with ``"reach"`` the distance the reach prior expects each to cover from the newest frame."""
        if self.reach is not None:
            return self.reach(obs[-1], actions)
        assert self.planner is not None
        encoder, head = self.planner
        features = encoder(stack_frames(obs)[None], training=False)
        n = tf.shape(actions)[0]
        if self.config.actions.plan_score == "critic":
            q = head([tf.repeat(features, n, 0), actions, tf.repeat(ctx[None], n, 0)], training=False)
            return tf.reduce_min(q, axis=-1)
        assert isinstance(self.novelty, EpisodicNovelty)
        now = self.novelty.embed(obs[-1][None], training=False)  # the newest frame's embedding, [1, D]
        change = head([tf.repeat(features, tf.shape(actions)[0], 0), actions], training=False)
        return self.novelty.distances(now + change)

    def warm_up(self) -> None:
        """Trace the compiled policy and novelty now, so nothing traces while a game runs."""
        if not self.config.eager:
            self._policy.get_concrete_function()
            if self.planner is not None or self.reach is not None:
                self._plan_scores.get_concrete_function()
            if self._held_score is not None:
                self._held_score.get_concrete_function()
        self.novelty.warm_up()

    def set_weights(self, weights: list[np.ndarray]) -> None:
        """Install new policy weights, then the planner's model head's when there is one (call between two
        decisions, on the acting thread)."""
        n = len(self.policy_net.weights)
        self.policy_net.set_weights(weights[:n])
        if self.planner is not None:
            self.planner[1].set_weights(weights[n:])

    def _sync_core(self) -> None:
        """Give the context the recurrent core's weights the policy has now (``learner.networks.recurrent_units``),
        which it moves the core's stored state with as steps leave its window. Called as each step is recorded:
        a policy that is the learner's own changes without :meth:`set_weights`."""
        if self.context.recurrent is None:
            return
        try:
            gru = self.policy_net.get_layer("core").get_layer("gru")
        except ValueError:
            raise ValueError("learner.networks.recurrent_units: the policy has no recurrent core (build it with "
                             "explorer.agent.networks.build_policy_net under the same settings)") from None
        self.context.recurrent.set_weights(*gru.get_weights())

    def policy(self, obs: tf.Tensor, ctx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pre-tanh mean and log-std of the policy for ``obs`` (``uint8[k, H, W, C]``) in context ``ctx``."""
        mean, log_std = self._policy(obs, tf.constant(ctx))
        return mean.numpy(), log_std.numpy()

    def act(self, step: Step) -> np.ndarray:
        """``float32[4 + n]``: stick values in [action_low, action_high], exploration noise included,
        then each button as sent (1 pressed, -1 released, :class:`~explorer.taps.Taps` applied; a
        trigger's pull as is).

        The policy decides every ``action_repeat`` steps; in between, the decision is held.
        """
        c = self.config
        if self.new_episode:
            self.context.reset(self._newest(step), step.info)
            self.held = None
            self.option_left = 0
            self.taps.reset()
            if self.place is not None:
                self.place.reset()
            if self.memory is not None:
                self.memory.reset()
            if self.map is not None:
                self.map.reset()
        self.last_ctx = self.context.value()
        if self.held is not None and self.held_steps < c.action_repeat and not self.cut:
            self.held_steps += 1
            self.started = False
            return self._sent(self.held)
        self.held_reach = None
        planned = False
        frame: np.ndarray | None = None
        back: np.ndarray | None = None
        if self.memory is not None:
            frame = step.obs[-1].numpy()
            back = self.memory.returning(frame)
        if back is None and self.map is not None:  # a route to a place visited less, when this one is worn
            frame = step.obs[-1].numpy() if frame is None else frame
            back = self.map.route(frame)
        if back is not None:  # returning along the run's best episode, or routing: the way's decision
            a = back
        elif self.deterministic:
            mean, _ = self.policy(step.obs, self.last_ctx)
            a = self._corrected(np.tanh(mean))
        else:
            rho, options = c.actions.noise_rho, c.actions.random_options
            self.noise = (rho * self.noise + np.sqrt(1 - rho**2) * self.rng.normal(size=self.sticks.dim)).astype(np.float32)
            if self.steps < c.schedule.warmup_steps and c.actions.residual:  # the proposal alone: sticky_prior
                a = self._proposal()
            elif self.steps < c.schedule.warmup_steps:
                a = np.clip(self.noise + self.sticks.prior, -1.0, 1.0)
            elif self.option_left > 0 or (options > 0 and self.rng.random() < options):
                a = self._option()
            else:
                mean, log_std = self.policy(step.obs, self.last_ctx)
                if c.algo == "sac":
                    a = self._corrected(np.tanh(mean + np.exp(log_std) * self.noise))
                else:
                    a = self._corrected(np.clip(np.tanh(mean) + c.td3_noise * self.noise, -1.0, 1.0))
                if self.planner is not None or self.reach is not None:
                    a, planned = self._plan(step, a, mean, log_std), True
        if self.memory is not None and frame is not None:
            self.memory.decided(a, frame)
        if self.map is not None:
            self.map.decided(a)
        held = settle(self.sticks(a), self.sticks.buttons).astype(np.float32)
        if self.place is not None and not planned:  # a decision the planner did not choose: its pace too
            self.place.decide(float(self._held_score(step.obs[-1], tf.constant(held[None]))[0]))
        self.held = held
        self.held_steps, self.started, self.cut = 1, True, False
        return self._sent(self.held)

    def _sent(self, held: np.ndarray) -> np.ndarray:
        """The held decision as sent this step (taps applied); the dead-reckoned path takes the step."""
        if self.place is not None:
            self.place.advance(held)
        return self.taps(held.copy())

    def _proposal(self) -> np.ndarray:
        """The context's proposal in force (``learner.actions.residual``), squashed."""
        at = self.context.proposal_at
        assert at is not None
        return self.last_ctx[at:at + self.sticks.dim]

    def _corrected(self, squashed: np.ndarray) -> np.ndarray:
        """The policy's squashed output as the action it stands for: itself, or with ``learner.actions.residual``
        the proposal corrected by it."""
        if not self.config.actions.residual:
            return squashed
        return corrected(self._proposal(), squashed, self.config.actions.residual)

    def _newest(self, step: Step) -> np.ndarray | None:
        """The newest frame of ``step`` when the context reads frames (``learner.networks.view_strips``,
        ``learner.networks.echo_units``)."""
        return step.obs[-1].numpy() if self.context.reads_frames else None

    def _plan(self, step: Step, own: np.ndarray, mean: np.ndarray, log_std: np.ndarray) -> np.ndarray:
        """The squashed action, among the policy's own (``own``) and ``plan_candidates`` random draws (as
        ``sticky_prior`` draws them), whose frame one decision on the planner expects farthest from
        this episode's memory (the policy's own while nothing is old enough to compare with); with
        ``learner.actions.plan_score = "critic"`` the draw alone, without the policy's own, that the critics value most;
        with ``"reach"`` the one the reach prior expects to go farthest. ``learner.actions.plan_from_policy`` of
        the draws are samples of the policy (``mean``, ``log_std``) instead: learning moves the candidates the
        planner filters, and the prior's draws keep it no narrower than ``sticky_prior``."""
        c = self.config.actions
        draws = self.rng.uniform(-1.0, 1.0, (c.plan_candidates - c.plan_from_policy, self.sticks.dim)) + self.sticks.prior
        squashed = np.clip(draws, -1.0, 1.0).astype(np.float32)
        if c.plan_from_policy:
            eps = self.rng.normal(size=(c.plan_from_policy, self.sticks.dim))
            if self.config.algo == "sac":
                sampled = np.tanh(np.asarray(mean) + np.exp(np.asarray(log_std)) * eps)
            else:
                sampled = np.clip(np.tanh(np.asarray(mean)) + self.config.td3_noise * eps, -1.0, 1.0)
            squashed = np.concatenate([squashed, sampled.astype(np.float32)])
        if self._own:
            squashed = np.concatenate([own[None], squashed])
        sent = np.stack([settle(self.sticks(x), self.sticks.buttons) for x in squashed]).astype(np.float32)
        scores = self._plan_scores(step.obs, tf.constant(sent), tf.constant(self.last_ctx)).numpy()
        routed = self.place.route_scores(sent, scores) if self.place is not None else None
        if routed is not None:  # learner.actions.plan_route: the candidate that goes farthest toward the frontier
            best = int(np.argmax(routed))
        else:
            best = int(np.argmax(scores if self.place is None else self.place.scores(sent, scores)))
        if self.place is not None:
            self.place.decide(float(scores[best]))
        if self.config.actions.replan_below:
            self.held_reach = float(scores[best])
        if self._own:
            self.kept_own = best == 0
        return squashed[best]

    def _option(self) -> np.ndarray:
        """The squashed action of the random option under way, or of a new one (``random_options``)."""
        if self.option_left <= 0:
            self.option = np.clip(self.rng.uniform(-1.0, 1.0, self.sticks.dim) + self.sticks.prior, -1.0, 1.0).astype(np.float32)
            self.option_left = self.config.actions.option_steps
        self.option_left -= 1
        assert self.option is not None
        return self.option

    def observe(self, step: Step, action: np.ndarray | None, next_step: Step) -> dict[str, float]:
        """Score ``next_step``'s novelty, advance the context, and hand the step to the adder."""
        ends = self.held_steps >= self.config.action_repeat
        if not ends and self.held_reach is not None and not (next_step.first or next_step.last):
            # learner.actions.replan_below: a held decision the newer frame no longer expects to go anywhere
            # (a wall the reach prior did not see coming) ends here, and the next step decides anew
            assert self.held is not None
            now = float(self._held_score(next_step.obs[-1], tf.constant(self.held[None]))[0])
            if now < self.config.actions.replan_below * self.held_reach:
                self.cut = ends = True
        metrics = self.record(step, action, next_step, starts=self.started, ends=ends)
        if self.started and self.kept_own is not None:  # a planned decision: the share that kept the policy's
            metrics["plan_kept_own"] = float(self.kept_own)
            self.kept_own = None
        return metrics

    def record(self, step: Step, action: Any, next_step: Step, starts: bool, ends: bool) -> dict[str, float]:
        """:meth:`observe` with the decision boundaries given (a recorded session gives its own)."""
        action = np.asarray(action, np.float32)
        obs, next_obs = stack_frames(step.obs), stack_frames(next_step.obs)
        self._sync_core()
        if step.first:
            self.context.reset(self._newest(step), step.info)
            self.novelty.reset(obs)
        ctx = self.context.value()
        reward = self.novelty.score(obs, action, next_obs, next_step.info)
        self.last_reward = reward
        next_frame = next_step.obs[-1].numpy()
        self.context.advance(action, reward, next_frame, next_step.info)
        if self.adder is not None:
            self.adder.add(step.obs.numpy() if step.first else None, action, reward, next_frame,
                           first=step.first, last=next_step.last, starts=starts, ends=ends,
                           ctx=ctx, next_ctx=self.context.value(), truncated=next_step.truncated)
        self.steps += 1
        self.new_episode = next_step.last
        metrics = {"novelty": reward}
        if self.memory is not None:
            self.memory.stepped(float(self.novelty.raw.numpy()))  # comparable between episodes, unlike reward
            if next_step.last:  # the decisions this episode returned along, logged as the episode ends
                metrics["returned"] = float(self.memory.end())
        if self.map is not None and next_step.last:  # the decisions this episode took on routes, and its places
            metrics["routed"], metrics["places"] = float(self.map.routes), float(self.map.count)
        return metrics

    # -- checkpoint state (a JSON part, see explorer.run.builder)
    def state(self) -> dict[str, Any]:
        return {"buttons": list(self.sticks.buttons), "steps": self.steps, "new_episode": self.new_episode,
                "noise": self.noise.tolist(),
                "rng": self.rng.bit_generator.state, "context": self.context.state(),
                "held": None if self.held is None else self.held.tolist(), "held_steps": self.held_steps,
                "option": None if self.option is None else self.option.tolist(), "option_left": self.option_left,
                "tap_wait": self.taps.wait.tolist()}

    def validate_state(self, s: Any) -> None:
        """Raise ``ValueError`` naming the field when ``s`` is not a state :meth:`state` writes (damage)."""
        try:
            state = ActorState.model_validate(s)
        except ValidationError as err:
            raise ValueError(first_error(err)) from None
        if state.buttons is not None and tuple(state.buttons) == self.sticks.buttons:
            # written for this layout: every action-sized list has its length
            for name in ("noise", "held", "option"):
                got = getattr(state, name)
                if got is not None and len(got) != self.sticks.dim:
                    raise ValueError(f"{name} has {len(got)} values, its actions {self.sticks.dim} (4 sticks and "
                                     f"pad.buttons = {list(self.sticks.buttons)})")
            proposal = state.context.proposal
            hold = None if self.context.proposal is None else self.context.proposal.hold
            if proposal is not None and hold is not None and proposal.left > hold:
                raise ValueError(f"context.proposal.left = {proposal.left} exceeds the {hold} steps a proposal is held")
            if proposal is not None and len(proposal.action) != self.sticks.dim:
                raise ValueError(f"context.proposal.action has {len(proposal.action)} values, its actions "
                                 f"{self.sticks.dim}")
            if len(state.context.prev_action) != self.sticks.dim:
                raise ValueError(f"context.prev_action has {len(state.context.prev_action)} values, its actions "
                                 f"{self.sticks.dim}")
        view = state.context.view
        if view is not None and self.context.view is not None and len(view.value) != self.context.view.strips:
            raise ValueError(f"context.view.value has {len(view.value)} strips, learner.networks.view_strips = "
                             f"{self.context.view.strips}")
        if view is not None and view.counts is not None and len(view.counts) not in (
                self.context.view.bins ** c for c in (1, 3, 4) if self.context.view is not None):
            raise ValueError(f"context.view.counts has {len(view.counts)} colour bins, not a power of "
                             "novelty.histogram_bins a frame's channels make")
        echo = state.context.echo
        if echo is not None and self.context.echo is not None and len(echo.value) != self.context.echo.units:
            raise ValueError(f"context.echo.value has {len(echo.value)} values, learner.networks.echo_units = "
                             f"{self.context.echo.units}")
        if state.context.recurrent is not None and self.context.recurrent is not None:
            self.context.recurrent.check(state.context.recurrent)
        validate_rng_state(state.rng, "rng")
        if state.context.proposal is not None:
            validate_rng_state(state.context.proposal.rng, "context.proposal.rng")

    def check_state(self, s: dict[str, Any]) -> None:
        """Raise ``ValueError`` when a whole state was written for other settings (other pad buttons)."""
        theirs = s.get("buttons")
        if theirs is not None and tuple(theirs) != self.sticks.buttons:
            raise ValueError(f"its actions hold pad.buttons = {list(theirs)}, this agent's {list(self.sticks.buttons)}")
        if len(s["noise"]) != self.sticks.dim:
            raise ValueError(f"its actions have {len(s['noise'])} values, this agent's {self.sticks.dim} (4 sticks "
                             f"and pad.buttons = {list(self.sticks.buttons)})")

    def load(self, s: dict[str, Any]) -> None:
        self.steps, self.new_episode, self.held_steps = s["steps"], s["new_episode"], s["held_steps"]
        self.noise = np.array(s["noise"], np.float32)
        self.rng.bit_generator.state = s["rng"]
        self.context.load(s["context"])
        self.held = None if s["held"] is None else np.array(s["held"], np.float32)
        option = s.get("option")  # checkpoints written before random options have none under way
        self.option = None if option is None else np.array(option, np.float32)
        self.option_left = int(s.get("option_left", 0))
        wait = s.get("tap_wait")  # checkpoints written before pad.tap_gap have none (nothing waits)
        if wait is not None and len(wait) == len(self.taps.wait):
            self.taps.wait = np.array(wait, np.int64)


class RecordedActor:
    """Replays a recorded session's actions through a learning actor's scoring and adder.

    The env's steps carry the recorded action (``info["action"]``) and where decisions start
    and end (``info["starts"]``, ``info["ends"]``).
    """

    def __init__(self, actor: LearningActor):
        self.actor = actor

    def act(self, step: Step) -> np.ndarray:
        return np.asarray(step.info["action"], np.float32)

    def observe(self, step: Step, action: np.ndarray | None, next_step: Step) -> dict[str, float]:
        return self.actor.record(step, action, next_step, starts=bool(step.info["starts"]), ends=bool(step.info["ends"]))


class RandomActor:
    """Random sticks and buttons, held for ``sticky_steps`` steps (1: uniform every step): baselines.

    Each button is pressed half the time, sent through :class:`~explorer.taps.Taps` with ``tap_gap``
    as the learning actor's are. With ``sticks`` the draw is moved by the stick range's prior and put
    on the range, as the learning actor's warm-up sticks are: what the prior and the range do without
    learning (``sticks`` then names the buttons too, each pressed in ``learner.actions.press_share``
    of draws).
    """

    def __init__(self, seed: int = 0, sticky_steps: int = 1, sticks: StickRange | None = None,
                 buttons: tuple[str, ...] = (), tap_gap: int = 0):
        self.rng = np.random.default_rng(seed)
        self.sticky_steps = sticky_steps
        self.sticks = sticks
        self.buttons = sticks.buttons if sticks is not None else tuple(buttons)
        self._held = np.zeros(N_AXES + len(self.buttons), np.float32)
        self._age = sticky_steps
        self.taps = Taps(self.buttons, tap_gap)

    def act(self, step: Step) -> np.ndarray:
        if step is not None and step.first:
            self.taps.reset()
        if self._age >= self.sticky_steps:
            self._held = self._draw()
            self._age = 0
        self._age += 1
        a = self._held if self.sticks is None else self.sticks(np.clip(self._held + self.sticks.prior, -1.0, 1.0))
        return self.taps(settle(a, self.buttons).astype(np.float32))

    def _draw(self) -> np.ndarray:
        """A new draw to hold: uniform in [-1, 1] per value (before the prior and range, with ``sticks``)."""
        return self.rng.uniform(-1.0, 1.0, len(self._held)).astype(np.float32)

    def observe(self, step: Step, action: np.ndarray | None, next_step: Step) -> dict[str, float]:
        return {}


class NoActor:
    """A person plays (``record``): sends nothing, scores nothing."""

    def act(self, step: Step) -> None:
        return None

    def observe(self, step: Step, action: np.ndarray | None, next_step: Step) -> dict[str, float]:
        return {}
