"""A worker's outbox: what its adder writes, shipped to a learner elsewhere in self-contained batches.

With ``explore --workers N`` each game runs in a process of its own and the
replay lives with the learner. The worker's :class:`~explorer.agent.adder.NStepAdder`
writes frames and transitions here instead of into a replay, exactly as it
would there; :meth:`Outbox.take` then hands out a :class:`Batch`: the
transitions written since the last batch, with every frame they reference and
their frame ids renumbered into that batch. A batch needs nothing from any
other batch, so batches can be lost (a worker died), reordered or merged from
any number of workers: :meth:`explorer.agent.replay.Replay.extend` stores one.

The price is a few frames sent twice: a transition reaches back up to
``keep`` frames, so the frames at the end of one batch that a later
transition will reference again are sent again with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.core import N_AXES


@dataclass
class Batch:
    """Transitions over their own frames: ``obs_ids`` and ``next_ids`` index ``frames``.

    Attributes:
      frames: ``uint8[F, H, W, C]``.
      obs_ids: ``int32[T, k]``, the observation's frames, oldest first.
      next_ids: ``int32[T, k]``, the observation n decisions later.
      action: ``float32[T, 4 + n]`` (sticks, then buttons). reward: ``float32[T]``, n-step novelty sums.
      discount: ``float32[T]``, 0 where the episode ended.
      ctx: ``float32[T, D]``. next_ctx: ``float32[T, D]``.
      steps: agent steps the worker took while these transitions were written.
    """

    frames: np.ndarray
    obs_ids: np.ndarray
    next_ids: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    discount: np.ndarray
    ctx: np.ndarray
    next_ctx: np.ndarray
    steps: int

    def __len__(self) -> int:
        return len(self.action)

    @property
    def nbytes(self) -> int:
        """Bytes of all arrays (what crosses the network)."""
        return sum(int(getattr(self, k).nbytes) for k in ("frames", "obs_ids", "next_ids", "action", "reward",
                                                          "discount", "ctx", "next_ctx"))

    @classmethod
    def empty(cls, frame_shape: tuple[int, ...], stack: int, ctx_dim: int, steps: int = 0,
              action_dim: int = N_AXES) -> Batch:
        """No transitions (a worker that has just started, or one that took steps but finished no transition)."""
        ids = np.zeros((0, stack), np.int32)
        ctx = np.zeros((0, ctx_dim), np.float32)
        return cls(np.zeros((0, *frame_shape), np.uint8), ids, ids.copy(), np.zeros((0, action_dim), np.float32),
                   np.zeros(0, np.float32), np.zeros(0, np.float32), ctx, ctx.copy(), steps)


class Outbox:
    """Frames and transitions as a replay takes them, held until :meth:`take` ships them.

    Args:
      frame_shape: ``(H, W, C)``.
      stack: frames per observation ``k``.
      ctx_dim: width of the context.
      action_dim: width of an action (sticks and buttons).
      keep: frames a transition can reach back from the newest frame written when it is
        added (``2 * stack + (n_step + 1) * action_repeat - 1`` covers every case, an episode
        start included); that many newest frames stay after a batch is taken.
    """

    def __init__(self, frame_shape: tuple[int, int, int], stack: int, ctx_dim: int, keep: int,
                 action_dim: int = N_AXES):
        self.frame_shape = tuple(int(s) for s in frame_shape)
        self.action_dim = action_dim
        self.stack = stack
        self.ctx_dim = ctx_dim
        self.keep = keep
        self._frames: list[np.ndarray] = []
        self._first = 0  # id of self._frames[0]
        self._rows: list[tuple[np.ndarray, np.ndarray, float, float, np.ndarray, np.ndarray, np.ndarray]] = []
        self.frames_written = 0
        self.written = 0

    def push_frame(self, frame: np.ndarray) -> int:
        """Hold one ``uint8[H, W, C]`` frame; returns its id in this worker's numbering."""
        self._frames.append(np.array(frame, np.uint8, copy=True))
        self.frames_written += 1
        return self.frames_written - 1

    def add(self, obs_ids, action, reward, discount, next_ids, ctx, next_ctx) -> None:
        """Hold one transition over frame ids of :meth:`push_frame`."""
        self._rows.append((np.asarray(obs_ids, np.int64), np.asarray(next_ids, np.int64), float(reward),
                           float(discount), np.asarray(action, np.float32), np.asarray(ctx, np.float32),
                           np.asarray(next_ctx, np.float32)))
        self.written += 1

    def __len__(self) -> int:
        """Transitions waiting to be shipped."""
        return len(self._rows)

    def take(self, steps: int) -> Batch:
        """The transitions written since the last batch, with their frames; ``steps``: agent steps they took.

        Raises:
          ValueError: a transition references a frame no longer held (``keep`` is too small).
        """
        rows, self._rows = self._rows, []
        if not rows:
            batch = Batch.empty(self.frame_shape, self.stack, self.ctx_dim, steps, self.action_dim)
        else:
            obs = np.stack([r[0] for r in rows])
            nxt = np.stack([r[1] for r in rows])
            low, high = int(obs.min()), int(nxt.max())
            if low < self._first:
                raise ValueError(f"a transition references frame {low}, but the outbox holds frames from "
                                 f"{self._first} on: keep = {self.keep} frames is too few")
            frames = np.stack(self._frames[low - self._first: high - self._first + 1])
            batch = Batch(frames, (obs - low).astype(np.int32), (nxt - low).astype(np.int32),
                          np.stack([r[4] for r in rows]), np.array([r[2] for r in rows], np.float32),
                          np.array([r[3] for r in rows], np.float32), np.stack([r[5] for r in rows]),
                          np.stack([r[6] for r in rows]), steps)
        # Later transitions reach back at most `keep` frames from frames not yet written.
        first = max(self._first, self.frames_written - self.keep)
        del self._frames[: first - self._first]
        self._first = first
        return batch
