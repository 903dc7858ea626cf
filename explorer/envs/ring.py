"""A ring of recent frames held in TensorFlow.

One writer (the capture thread, or the synchronous game loop) pushes
``uint8[H, W, C]`` frames; readers in other threads take the newest ``k``
frames as the observation and a longer window of recent frames for novelty.
"""

from __future__ import annotations

import threading

import numpy as np
import tensorflow as tf


class FrameRing:
    """Fixed-capacity ring buffer of ``uint8[H, W, C]`` frames in a ``tf.Variable``.

    The frames live in ``frames`` (``uint8[capacity, H, W, C]``); ``count`` is the
    number of frames ever written (int64), so the newest frame sits at slot
    ``(count - 1) % capacity``. A short lock makes a push (slot write, then
    counter) atomic for readers; it is held for one small assignment, never
    across a model call.
    """

    def __init__(self, capacity: int, shape: tuple[int, int, int]):
        if capacity < 2:
            raise ValueError(f"ring capacity must be at least 2 frames, got {capacity}")
        self.capacity = int(capacity)
        self.shape = tuple(int(s) for s in shape)
        self.frames = tf.Variable(tf.zeros((self.capacity, *self.shape), tf.uint8), trainable=False, name="ring_frames")
        self.count = tf.Variable(0, dtype=tf.int64, trainable=False, name="ring_count")
        self._lock = threading.Lock()
        self._written = 0
        self._new_frame = threading.Condition(self._lock)

    @property
    def written(self) -> int:
        """Frames pushed since creation (a Python int, cheap to read)."""
        return self._written

    def push(self, frame: np.ndarray | tf.Tensor) -> int:
        """Append one ``uint8[H, W, C]`` frame; returns the number written so far."""
        if isinstance(frame, np.ndarray):
            dtype, shape, rows = frame.dtype.name, frame.shape, frame[None]
        else:
            frame = tf.convert_to_tensor(frame)
            dtype, shape, rows = frame.dtype.name, tuple(frame.shape), tf.expand_dims(frame, 0)
        if dtype != "uint8" or tuple(shape) != self.shape:
            raise ValueError(f"ring expects uint8{list(self.shape)} frames, got {dtype}{list(shape)}")
        with self._new_frame:
            slot = self._written % self.capacity
            # One scatter op: ``frames[slot].assign(frame)`` builds a strided-slice assignment in Python
            # first, 1.3 ms a frame against 0.06 ms (every env pushes a frame per step).
            tf.raw_ops.ResourceScatterUpdate(resource=self.frames.handle, indices=np.array([slot], np.int64),
                                             updates=rows)
            self._written += 1
            # A numpy value, not a Python int: TensorFlow caches the tensor of every distinct Python
            # scalar it converts, so a live run's ever-growing frame count grew memory by ~0.8 KB a frame.
            # The raw op takes it as it is (``assign`` converts it again: three times the cost).
            tf.raw_ops.AssignVariableOp(resource=self.count.handle, value=np.array(self._written, np.int64))
            self._new_frame.notify_all()
            return self._written

    def wait_for(self, written: int, timeout: float | None = None) -> bool:
        """Block until more than ``written`` frames were pushed; False on timeout."""
        with self._new_frame:
            return self._new_frame.wait_for(lambda: self._written > written, timeout)

    def latest(self, k: int) -> tf.Tensor:
        """The newest ``k`` frames, oldest first: ``uint8[k, H, W, C]``.

        Before ``k`` frames exist, the oldest available frame is repeated (the
        first frame of a run stands in for the frames before it).
        """
        if not 1 <= k < self.capacity:
            raise ValueError(f"k must be in [1, {self.capacity - 1}], got {k}")
        with self._lock:
            n = self._written
            if n == 0:
                raise LookupError("the frame ring is empty: no frame has been captured yet")
            idx = np.maximum(np.arange(n - k, n), 0) % self.capacity
            return tf.raw_ops.ResourceGather(resource=self.frames.handle, indices=idx, dtype=tf.uint8)  # tf.gather: 2.5x

    def window(self, k: int) -> tf.Tensor:
        """Up to ``k`` newest frames, oldest first: ``uint8[min(k, written), H, W, C]``."""
        if not 1 <= k < self.capacity:
            raise ValueError(f"k must be in [1, {self.capacity - 1}], got {k}")
        with self._lock:
            n = self._written
            idx = np.arange(max(0, n - k), n) % self.capacity
            return tf.gather(self.frames, idx)

    def reset(self) -> None:
        """Forget all frames (a new episode)."""
        with self._lock:
            self._written = 0
            self.count.assign(0)
