"""Replay: transitions over a ring of single uint8 frames, under a memory cap.

Written by the adder (control thread), sampled by the learner (its own thread in
live mode); a lock keeps each batch consistent. As a checkpoint part it saves
itself to ``replay.npz``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from explorer.config import Config, frame_shape, replay_slots
from explorer.core import N_AXES, gather_stacked

if TYPE_CHECKING:
    from explorer.agent.outbox import Batch


def replay_capacity(config: Config) -> int:
    """Transitions (and frames) the learner's replay holds with this config's frames and ``learner.schedule.replay_mb``.

    The :class:`Replay` sizes itself by the same :func:`~explorer.config.replay_slots`, which the
    config's checks use too (a replay too small for a batch is refused at load).
    """
    return replay_slots(frame_shape(config.observation), config.observation.stack, config.learner.schedule.replay_mb)


class Replay:
    """Transitions over a ring of single ``uint8[H, W, C]`` frames, under a memory cap.

    Each frame is stored once; a transition holds the global ids of its ``k``
    observation frames and ``k`` next-observation frames (n steps later). A
    transition whose frames were overwritten is never sampled.
    """

    def __init__(self, frame_shape: tuple[int, int, int], stack: int, ctx_dim: int, memory_mb: float, seed: int,
                 action_dim: int = N_AXES, after: int = 0):
        self.frame_shape = tuple(frame_shape)
        self.stack = stack
        #: with after > 0, a sample also holds the frame ``after`` agent steps past each observation's newest
        #: (the planner's target: frames of an episode are pushed one per step, so that frame's id is the
        #: newest's plus ``after``), or the next observation's newest when that comes sooner
        self.after = int(after)
        #: frames kept, and transitions kept (one per frame pushed)
        self.capacity = n = replay_slots(self.frame_shape, stack, memory_mb)
        # Touch every page now: the whole memory cap is taken at the start, so a long run's
        # memory stays flat instead of creeping up as the replay fills (and a cap the machine
        # cannot hold fails at once, not an hour in).
        self.frames = np.empty((n, *frame_shape), np.uint8)
        self.frames.fill(0)
        self.obs_ids = np.zeros((n, stack), np.int64)
        self.next_ids = np.zeros((n, stack), np.int64)
        self.action = np.zeros((n, action_dim), np.float32)  # the four sticks, then the buttons
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

    def extend(self, batch: Batch) -> None:
        """Store a batch shipped by a worker (:mod:`explorer.agent.outbox`): its frames, then its
        transitions with their frame ids moved from the batch's numbering into this replay's."""
        f, t = len(batch.frames), len(batch)
        if f > self.capacity:
            raise ValueError(f"a batch of {f} frames does not fit a replay of {self.capacity} (learner.schedule.replay_mb)")
        with self.lock:
            base = self.frames_written
            self.frames[(base + np.arange(f)) % self.capacity] = batch.frames
            self.frames_written += f
            rows = (self.written + np.arange(t)) % self.capacity
            self.obs_ids[rows], self.next_ids[rows] = batch.obs_ids + base, batch.next_ids + base
            self.action[rows], self.reward[rows], self.discount[rows] = batch.action, batch.reward, batch.discount
            self.ctx[rows], self.next_ctx[rows] = batch.ctx, batch.next_ctx
            self.written += t

    def __len__(self) -> int:
        return min(self.written, self.capacity)

    def _stacked(self, ids: np.ndarray) -> np.ndarray:
        return gather_stacked(self.frames, ids % self.capacity)  # uint8[B, H, W, k*C]

    def mark(self) -> tuple[int, int]:
        """``(transitions, frames)`` written so far: a point :meth:`sample` can sample the replay as it was at."""
        with self.lock:
            return self.written, self.frames_written

    def sample(self, batch: int, at: tuple[int, int] | None = None, margin: tuple[int, int] = (0, 0)) -> dict[str, np.ndarray]:
        """``batch`` transitions drawn uniformly, with their observations stacked: ``uint8[B, H, W, k*C]``.

        Args:
          batch: transitions.
          at: sample the replay as it was at this :meth:`mark`, although more may have been added
            since (a learner on another thread, one step behind the actor): what was added after
            it is never drawn, so the batch depends on ``at`` alone, not on timing.
          margin: ``(transitions, frames)`` that may be added while this call runs or since ``at``,
            at most. Transitions whose slots or frames they could overwrite are not drawn, and
            with a frame margin the frames are copied outside the lock, so a writer on another
            thread never waits for the copy.
        """
        with self.lock:
            rows = self._draw(batch, at, margin)
            if not margin[1]:
                return self._with_frames(rows)
        return self._with_frames(rows)

    def _draw(self, batch: int, at: tuple[int, int] | None, margin: tuple[int, int]) -> dict[str, np.ndarray]:
        written, frames_written = at if at is not None else (self.written, self.frames_written)
        n, cap = min(written, self.capacity), self.capacity
        oldest = frames_written - cap + margin[1]

        def unusable(idx: np.ndarray) -> np.ndarray:
            bad = self.obs_ids[idx, 0] < oldest
            if margin[0] and written >= cap:
                bad |= (idx - written) % cap < margin[0]
            return bad

        idx = self.rng.integers(0, n, size=batch)
        stale = unusable(idx)
        while stale.any():
            idx[stale] = self.rng.integers(0, n, size=int(stale.sum()))
            stale = unusable(idx)
        return {"obs_ids": self.obs_ids[idx], "action": self.action[idx], "reward": self.reward[idx],
                "discount": self.discount[idx], "next_ids": self.next_ids[idx],
                "ctx": self.ctx[idx], "next_ctx": self.next_ctx[idx]}

    def _with_frames(self, rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {"obs": self._stacked(rows["obs_ids"]), "action": rows["action"], "reward": rows["reward"],
               "discount": rows["discount"], "next_obs": self._stacked(rows["next_ids"]),
               "ctx": rows["ctx"], "next_ctx": rows["next_ctx"]}
        if self.after:
            ids = np.minimum(rows["obs_ids"][:, -1] + self.after, rows["next_ids"][:, -1])
            out["after"] = self.frames[ids % self.capacity]
        return out

    def state(self) -> dict[str, np.ndarray]:
        n = len(self)
        return {"frames": self.frames[: min(self.frames_written, self.capacity)], "obs_ids": self.obs_ids[:n],
                "next_ids": self.next_ids[:n], "action": self.action[:n], "reward": self.reward[:n],
                "discount": self.discount[:n], "ctx": self.ctx[:n], "next_ctx": self.next_ctx[:n],
                "counters": np.array([self.frames_written, self.written], np.int64)}

    def check(self, state: dict[str, np.ndarray]) -> None:
        """Raise ``ValueError`` when saved arrays do not fit this replay (frame size, stack, context, capacity)."""
        frames, obs_ids, ctx = state["frames"], state["obs_ids"], state["ctx"]
        if tuple(frames.shape[1:]) != self.frame_shape:
            raise ValueError(f"its frames are {list(frames.shape[1:])}, this replay's {list(self.frame_shape)} "
                             "(frame size, colour or grey)")
        if obs_ids.shape[1:] != (self.stack,) or ctx.shape[1:] != self.ctx.shape[1:]:
            raise ValueError(f"its observations stack {obs_ids.shape[1:]} frames with context {ctx.shape[1:]}, this "
                             f"replay's {self.stack} with {self.ctx.shape[1:]}")
        if len(frames) > self.capacity or len(obs_ids) > self.capacity:
            raise ValueError(f"it holds {max(len(frames), len(obs_ids))} rows, more than this replay's {self.capacity} "
                             "(learner.schedule.replay_mb)")

    def validate(self, state: dict[str, np.ndarray]) -> None:
        """Raise ``ValueError`` naming the array when saved arrays hold what :meth:`state` never writes (damage)."""
        kinds = {"frames": np.uint8, "obs_ids": np.int64, "next_ids": np.int64, "action": np.float32,
                 "reward": np.float32, "discount": np.float32, "ctx": np.float32, "next_ctx": np.float32,
                 "counters": np.int64}
        missing = sorted(set(kinds) - set(state))
        if missing:
            raise ValueError(f"{', '.join(missing)} missing")
        for key, kind in kinds.items():
            if state[key].dtype != kind:
                raise ValueError(f"{key} is {state[key].dtype}, not {np.dtype(kind)}")
        counters = state["counters"]
        if counters.shape != (2,) or (counters < 0).any():
            raise ValueError(f"counters = {counters.tolist()}: two counts of frames and transitions written")
        frames_written, written = (int(x) for x in counters)
        n = len(state["obs_ids"])
        if len(state["frames"]) > frames_written or n > written:
            raise ValueError(f"it holds {len(state['frames'])} frames and {n} transitions, more than counters = "
                             f"{counters.tolist()} says were written")
        rows = {key: len(state[key]) for key in kinds if key not in ("frames", "counters")}
        if len(set(rows.values())) > 1:
            raise ValueError(f"its arrays have different numbers of rows: {rows}")
        for key in ("obs_ids", "next_ids"):
            ids = state[key]
            if ids.size and (ids.min() < 0 or ids.max() >= frames_written):
                raise ValueError(f"{key} holds frame ids from {ids.min()} to {ids.max()}; the frames written are "
                                 f"0 to {frames_written - 1}")
        for key in ("action", "reward", "discount", "ctx", "next_ctx"):
            if not np.isfinite(state[key]).all():
                raise ValueError(f"{key} holds NaN or infinite values")

    def load(self, state: dict[str, np.ndarray]) -> None:
        self.frames_written, self.written = (int(x) for x in state["counters"])
        self.frames[: len(state["frames"])] = state["frames"]
        n = len(state["obs_ids"])
        for key in ("obs_ids", "next_ids", "action", "reward", "discount", "ctx", "next_ctx"):
            getattr(self, key)[:n] = state[key]
