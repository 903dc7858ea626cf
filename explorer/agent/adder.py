"""The adder: steps, told where decisions end, become n-step transitions in replay.

A decision is one action of the actor, held for one or more agent steps
(``learner.action_repeat``); its novelty is summed, discounted, over the steps
it was held. ``n_step`` decisions make one replayed transition: the discounted
sum of their novelty, then a bootstrap from the critic ``n_step`` decisions on
(or none where the episode ended). The adder is told where a decision ends (by
the actor, or by a recorded session's decision flags); it never guesses from
the action values.

Frames are written to replay once each; a transition holds frame ids.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator


class TransitionSink(Protocol):
    """Where an adder writes: a :class:`~explorer.agent.replay.Replay`, or a worker's
    :class:`~explorer.agent.outbox.Outbox` that ships batches to a learner elsewhere."""

    def push_frame(self, frame: np.ndarray) -> int:
        """Store one ``uint8[H, W, C]`` frame; returns its id (ids count up from 0)."""

    def add(self, obs_ids: Any, action: Any, reward: Any, discount: Any, next_ids: Any, ctx: Any,
            next_ctx: Any) -> None:
        """Store one transition over frame ids."""


_Id = Annotated[int, Field(ge=0, lt=2**62)]  # frame ids count up from 0
_Finite = Annotated[float, Field(allow_inf_nan=False)]


class _DecisionState(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    ids: list[_Id] = Field(min_length=1)
    action: list[_Finite]
    ctx: list[_Finite]
    ret: _Finite
    steps: Annotated[int, Field(ge=0)]


class AdderState(BaseModel):
    """What :meth:`NStepAdder.state` writes (``adder.json`` of a checkpoint)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    obs_ids: list[_Id] | None
    #: (obs ids, action, summed novelty, context, discount) of each decision waiting
    pending: list[tuple[list[_Id], list[_Finite], _Finite, list[_Finite], Annotated[float, Field(ge=0, le=1)]]]
    decision: _DecisionState | None

    @field_validator("pending", mode="before")
    @classmethod
    def _tuples_from_json(cls, value: Any) -> Any:  # JSON has lists; strict tuples take tuples
        return [tuple(p) if isinstance(p, list) else p for p in value] if isinstance(value, list) else value


@dataclass
class _Decision:
    """One decision while it is held: where it started and the novelty summed so far."""

    ids: np.ndarray
    action: np.ndarray
    ctx: np.ndarray
    ret: float = 0.0
    steps: int = 0


class NStepAdder:
    """Writes frames and n-step transitions into ``replay``.

    Args:
      replay: where transitions go (a replay, or an outbox).
      gamma: discount per agent step.
      n_step: decisions summed before bootstrapping.
    """

    def __init__(self, replay: TransitionSink, gamma: float, n_step: int):
        self.replay = replay
        self.gamma = gamma
        self.n_step = n_step
        #: decisions waiting for their n-step return: (obs ids, action, summed novelty, context, discount)
        self.pending: deque[tuple[np.ndarray, np.ndarray, float, np.ndarray, float]] = deque()
        self.decision: _Decision | None = None
        self.obs_ids: np.ndarray | None = None

    def add(self, obs: np.ndarray | None, action: np.ndarray, reward: float, next_frame: np.ndarray, *,
            first: bool, last: bool, starts: bool, ends: bool, ctx: np.ndarray, next_ctx: np.ndarray,
            truncated: bool = False) -> None:
        """One agent step.

        Args:
          obs: ``uint8[k, H, W, C]``, the observation the action was taken on; read only when
            ``first`` (later observations are the frames already written).
          action: ``float32[4 + n]`` sent (the sticks, then one value per pad button).
          reward: its novelty.
          next_frame: ``uint8[H, W, C]``, the newest frame after the step.
          first: ``obs`` opens an episode. last: ``next_frame`` closes it.
          starts: ``action`` is a new decision (not the previous one, held).
          ends: the decision ends with this step (the next step starts a new one).
          ctx: the context the action was chosen in. next_ctx: the context after the step.
          truncated: with ``last``, the episode was cut by a limit the agent does not see coming
            (:attr:`explorer.core.Step.truncated`): its transitions bootstrap from ``next_frame``.
        """
        if first or self.obs_ids is None:
            self.pending.clear()
            self.decision = None
            assert obs is not None, "the first step of an episode needs its observation"
            self.obs_ids = np.array([self.replay.push_frame(f) for f in np.asarray(obs, np.uint8)])
        new_id = self.replay.push_frame(np.asarray(next_frame, np.uint8))
        next_ids = np.append(self.obs_ids[1:], new_id)
        if starts and self.decision is not None:  # the previous decision was cut short
            self._end_decision(self.obs_ids, ctx, last=False)
        if self.decision is None:
            self.decision = _Decision(self.obs_ids, np.asarray(action, np.float32), ctx)
        d = self.decision
        d.ret += self.gamma**d.steps * reward
        d.steps += 1
        if ends or last:
            self._end_decision(next_ids, next_ctx, last, truncated)
        self.obs_ids = None if last else next_ids

    def _end_decision(self, next_ids: np.ndarray, next_ctx: np.ndarray, last: bool, truncated: bool = False) -> None:
        """Queue the open decision; write n-step transitions once ``n_step`` decisions wait (all at the end:
        with no bootstrap where the episode ended, from ``next_ids`` where it was ``truncated``)."""
        d, self.decision = self.decision, None
        assert d is not None
        self.pending.append((d.ids, d.action, d.ret, d.ctx, self.gamma**d.steps))
        if len(self.pending) == self.n_step or last:
            while self.pending:
                ret, disc = 0.0, 1.0
                for p in self.pending:
                    ret += disc * p[2]
                    disc *= p[4]
                ids, a, _, cx, _ = self.pending.popleft()
                self.replay.add(ids, a, ret, 0.0 if last and not truncated else disc, next_ids, cx, next_ctx)
                if not last:
                    break

    # -- checkpoint state (a JSON part, see explorer.run.builder)
    def state(self) -> dict[str, Any]:
        d = self.decision
        return {"obs_ids": None if self.obs_ids is None else self.obs_ids.tolist(),
                "pending": [(p[0].tolist(), p[1].tolist(), p[2], p[3].tolist(), p[4]) for p in self.pending],
                "decision": None if d is None else {"ids": d.ids.tolist(), "action": d.action.tolist(),
                                                    "ctx": d.ctx.tolist(), "ret": d.ret, "steps": d.steps}}

    def validate_state(self, s: Any) -> None:
        """Raise ``ValueError`` naming the field when ``s`` is not a state :meth:`state` writes (damage)."""
        from pydantic import ValidationError

        from explorer.agent.checkpoint import first_error

        try:
            state = AdderState.model_validate(s)
        except ValidationError as err:
            raise ValueError(first_error(err)) from None
        stacks = {len(ids) for ids in (state.obs_ids, *(p[0] for p in state.pending),
                                       state.decision.ids if state.decision else None) if ids is not None}
        want = getattr(self.replay, "stack", None)
        if len(stacks) > 1 or (want is not None and stacks and stacks != {want}):
            raise ValueError(f"its frame-id stacks have {sorted(stacks)} ids, this agent's observations stack {want}")
        if len(state.pending) > self.n_step:
            raise ValueError(f"pending holds {len(state.pending)} decisions, learner.n_step = {self.n_step}")

    def load(self, s: dict[str, Any]) -> None:
        self.obs_ids = None if s["obs_ids"] is None else np.array(s["obs_ids"], np.int64)
        self.pending = deque((np.array(p[0], np.int64), np.array(p[1], np.float32), p[2], np.array(p[3], np.float32), p[4])
                             for p in s["pending"])
        d = s["decision"]
        self.decision = None if d is None else _Decision(np.array(d["ids"], np.int64), np.array(d["action"], np.float32),
                                                         np.array(d["ctx"], np.float32), d["ret"], d["steps"])
