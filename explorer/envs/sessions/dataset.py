"""A ``tf.data`` pipeline of transitions from recorded sessions, and the frame stacking it shares with the reader.

TensorFlow is imported only when a dataset is made.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from explorer.core import action_dim
from explorer.envs.sessions.format import SessionError, StepArrays, _fields, remap_actions


class Recorded(Protocol):
    """What the pipeline reads from a session (:class:`~explorer.envs.sessions.reader.Session`)."""

    path: Path
    frame_shape: tuple[int, ...] | None
    buttons: tuple[str, ...]

    def iter_chunks(self) -> Iterator[tuple[np.ndarray, StepArrays]]: ...


def stack_index(first: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` newest rows ending at each row, oldest first.

    A stack does not reach back past the start of its row's episode (a row with
    ``first`` set, or row 0): the episode's first row stands in for the rows
    before it, as :meth:`explorer.envs.ring.FrameRing.latest` does.

    Args:
      first: ``bool[n]``, rows that open an episode.
      k: rows per stack.

    Returns:
      ``int64[n, k]``.
    """
    n = len(first)
    rows = np.arange(n)
    starts = np.where(np.asarray(first, bool), rows, 0)
    episode_start = np.maximum.accumulate(starts) if n else starts
    wanted = rows[:, None] + np.arange(1 - k, 1)[None, :]
    return np.maximum(wanted, episode_start[:, None])


def _pools(sessions: Sequence[Recorded], stack: int, batch_size: int, shuffle: int,
           rng: np.random.Generator, drop_remainder: bool,
           buttons: tuple[str, ...] = ()) -> Iterator[dict[str, np.ndarray]]:
    """Pools of transitions for :func:`sessions_dataset`: a run of consecutive frames and index stacks into it.

    Each pool holds a multiple of ``batch_size`` transitions (the very last may
    hold fewer), at least ``shuffle`` of them when shuffling, in a random order
    then. Frames are passed once per pool; the stacking gather runs in TensorFlow.
    """
    target = max(batch_size, shuffle)
    for session in sessions:
        frames: list[np.ndarray] = []  # consecutive rows of this session, from row `base`
        steps: list[StepArrays] = []
        base = 0
        rows = 0  # rows buffered
        pending: list[np.ndarray] = []  # session rows of transitions not yet emitted

        def emit(final: bool, have: tuple[str, ...] = session.buttons) -> dict[str, np.ndarray] | None:
            nonlocal frames, steps, base, rows, pending
            src = np.concatenate(pending) if pending else np.zeros(0, np.int64)
            if shuffle:
                src = src[rng.permutation(len(src))]
            n = len(src) if final and not drop_remainder else (len(src) // batch_size) * batch_size
            if n == 0:
                return None
            out_src, keep = src[:n], src[n:]
            f = np.concatenate(frames) if len(frames) > 1 else frames[0]
            st = StepArrays(*(np.concatenate(x) for x in zip(*map(_fields, steps), strict=True)))
            frames, steps = [f], [st]
            local = out_src - base
            idx = stack_index(st.first, stack)
            pool = {"frames": f, "obs_idx": idx[local].astype(np.int32), "next_idx": idx[local + 1].astype(np.int32),
                    "action": remap_actions(st.action[local], have, buttons), "reward": st.reward[local],
                    "first": st.first[local],
                    "last": st.last[local + 1], "index": st.index[local]}
            # Keep the rows that later transitions (and their stacks) still need.
            oldest = base + rows - 1  # the newest row waits for its successor
            if len(keep):
                oldest = min(oldest, int(keep.min()))
            cut = max(0, oldest - stack + 1 - base)
            if cut:
                frames, steps = [f[cut:]], [StepArrays(*(x[cut:] for x in _fields(st)))]
                base, rows = base + cut, rows - cut
            pending = [np.sort(keep)] if len(keep) else []
            return pool

        tail: tuple[np.ndarray, np.ndarray] | None = None  # last/first flags of the previous chunk's last row
        for chunk_frames, chunk_steps in session.iter_chunks():
            frames.append(chunk_frames)
            steps.append(chunk_steps)
            if tail is None:  # the session's first chunk: its rows start at 0
                last, first, start = chunk_steps.last, chunk_steps.first, 0
            else:  # the previous chunk's last row gets its successor now
                last = np.concatenate([tail[0], chunk_steps.last])
                first = np.concatenate([tail[1], chunk_steps.first])
                start = base + rows - 1
            rows += len(chunk_steps)
            tail = (chunk_steps.last[-1:], chunk_steps.first[-1:])
            src = start + np.arange(len(last) - 1)
            pending.append(src[~last[:-1] & ~first[1:]])
            if sum(len(p) for p in pending) >= target:
                pool = emit(final=False)
                if pool is not None:
                    yield pool
        if rows:
            pool = emit(final=True)
            if pool is not None:
                yield pool


def transitions_dataset(sessions: Sequence[Recorded], stack: int, batch_size: int, shuffle: int = 0,
                        repeat: bool = False, seed: int | None = None, drop_remainder: bool = False,
                        buttons: Sequence[str] | None = None) -> Any:
    """:func:`explorer.envs.sessions.reader.sessions_dataset` for sessions already open.

    Raises:
      SessionError: no session holds frames, or the frame shapes differ.
    """
    import tensorflow as tf

    shapes = {s.frame_shape for s in sessions if s.frame_shape is not None}
    if not shapes:
        raise SessionError(f"no frames in {', '.join(str(s.path) for s in sessions)}")
    if len(shapes) > 1:
        raise SessionError("sessions have different frame shapes: " + ", ".join(
            f"{s.path} {list(s.frame_shape or ())}" for s in sessions))
    h, w, c = next(iter(shapes))
    layouts = {s.buttons for s in sessions}
    if buttons is None and len(layouts) > 1:
        raise SessionError(f"sessions hold different pad buttons {sorted(map(list, layouts))}; pass buttons= to "
                           "read them all in one layout")
    want = tuple(buttons) if buttons is not None else layouts.pop()
    if stack < 1 or batch_size < 1:
        raise ValueError(f"stack and batch_size must be positive, got {stack} and {batch_size}")
    rng = np.random.default_rng(seed)

    def pools() -> Iterator[dict[str, np.ndarray]]:
        return _pools(sessions, stack, batch_size, shuffle, rng, drop_remainder, want)

    index = tf.TensorSpec([None, stack], tf.int32)
    signature = {
        "frames": tf.TensorSpec([None, h, w, c], tf.uint8), "obs_idx": index, "next_idx": index,
        "action": tf.TensorSpec([None, action_dim(want)], tf.float32), "reward": tf.TensorSpec([None], tf.float32),
        "first": tf.TensorSpec([None], tf.bool), "last": tf.TensorSpec([None], tf.bool),
        "index": tf.TensorSpec([None], tf.int64),
    }
    ds = tf.data.Dataset.from_generator(pools, output_signature=signature)
    if repeat:
        ds = ds.repeat()

    def batches(pool: dict[str, tf.Tensor]) -> Any:
        n = tf.shape(pool["obs_idx"], out_type=tf.int64)[0]

        def batch(i: tf.Tensor) -> dict[str, tf.Tensor]:
            part = slice(i * batch_size, (i + 1) * batch_size)
            return {"obs": tf.gather(pool["frames"], pool["obs_idx"][part]), "action": pool["action"][part],
                    "reward": pool["reward"][part], "next_obs": tf.gather(pool["frames"], pool["next_idx"][part]),
                    "first": pool["first"][part], "last": pool["last"][part], "index": pool["index"][part]}

        return tf.data.Dataset.range((n + batch_size - 1) // batch_size).map(batch, num_parallel_calls=tf.data.AUTOTUNE,
                                                                             deterministic=True)

    return ds.flat_map(batches).prefetch(tf.data.AUTOTUNE)
