"""The shared vocabulary every part speaks: steps, the action layout, frame stacking, protocols, errors.

Imports run one way: ``cli -> run -> {envs, agent} -> core``; ``envs`` and
``agent`` never import each other, so whatever they share lives here.

An **action** is ``float32[4 + n]`` in [-1, 1]: the four stick values, in the
order of :data:`AXES` (camera x, camera y, walk x, walk y), then one value per
pad button the policy holds (``pad.buttons``, names from :data:`PAD_BUTTONS`).
Positive y is up on the stick (forward for walk, look up for camera). A button
is pressed while its value is above 0; a trigger (:data:`TRIGGERS`) is pulled
by ``max(value, 0)``. All zeros (:func:`neutral`, :data:`NEUTRAL` for the
sticks alone) centres the sticks and releases every button: what every pad
returns to on every way out.

An **observation** is ``uint8[k, H, W, C]``: the newest ``k`` frames, oldest
first, read from an env's frame ring. Networks take it stacked along
channels, ``uint8[H, W, k*C]`` (:func:`stack_frames`).
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

#: the policy's stick axes, in action order
AXES = ("camera_x", "camera_y", "walk_x", "walk_y")
N_AXES = len(AXES)
#: sticks centred (an action without buttons)
NEUTRAL = np.zeros(N_AXES, np.float32)
#: Xbox 360 buttons and triggers a policy may hold. Start, Back and Guide are left out on purpose:
#: they open menus and overlays, which no exploring policy should be able to do.
PAD_BUTTONS = ("a", "b", "x", "y", "lb", "rb", "lt", "rt", "ls", "rs",
               "dpad_up", "dpad_down", "dpad_left", "dpad_right")
#: the analogue triggers among :data:`PAD_BUTTONS`: pulled by ``max(value, 0)``, not pressed or released
TRIGGERS = ("lt", "rt")


def action_dim(buttons: tuple[str, ...] = ()) -> int:
    """Length of an action: the four stick axes and one value per button."""
    return N_AXES + len(buttons)


def neutral(buttons: tuple[str, ...] = ()) -> np.ndarray:
    """``float32[4 + n]`` zeros: sticks centred, every button released, triggers at rest."""
    return np.zeros(action_dim(buttons), np.float32)


def action_names(buttons: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Names of an action's values: the stick axes, then ``button_<name>`` per button."""
    return AXES + tuple(f"button_{b}" for b in buttons)


def action_stats(actions: np.ndarray, buttons: tuple[str, ...] = ()) -> dict[str, float]:
    """Figures of ``float32[n, 4 + len(buttons)]`` actions: ``action/mean_<axis>`` and ``action/abs_<axis>``
    per stick axis, ``action/pressed_<button>`` (the share of steps it was pressed or pulled) per button."""
    a = np.asarray(actions, np.float32)
    stats = {f"action/mean_{axis}": float(m) for axis, m in zip(AXES, a[:, :N_AXES].mean(0), strict=True)}
    stats |= {f"action/abs_{axis}": float(m) for axis, m in zip(AXES, np.abs(a[:, :N_AXES]).mean(0), strict=True)}
    stats |= {f"action/pressed_{b}": float(m) for b, m in zip(buttons, (a[:, N_AXES:] > 0).mean(0), strict=True)}
    return stats


def settle(action: np.ndarray, buttons: tuple[str, ...]) -> np.ndarray:
    """What the pad does with ``action``, as action values: each button becomes 1 (pressed) or -1
    (released); sticks and triggers are kept. The actors store this, so replay, sessions and the
    critic see the buttons as they were sent."""
    a = np.asarray(action, np.float32).copy()
    for i, name in enumerate(buttons):
        if name not in TRIGGERS:
            a[N_AXES + i] = 1.0 if a[N_AXES + i] > 0 else -1.0
    return a


class ExplorerError(RuntimeError):
    """A failure the user can fix; the command line prints its message on one line and exits 1.

    Attributes:
      says_what_was_kept: the message already says what a stopped run kept (a mode adds it otherwise).
    """

    says_what_was_kept = False


class Terminated(BaseException):  # noqa: N818 (a signal, like KeyboardInterrupt, not an error)
    """SIGTERM or SIGHUP, raised in the main thread so that ``finally`` blocks run (centring the pad).

    Attributes:
      signum: the signal's number (the process exits with ``128 + signum``).
    """

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Stopped(ExplorerError):
    """A run stopped at once by a repeated signal; the message says what it kept.

    Attributes:
      signum: the signal's number (the process exits with ``128 + signum``).
    """

    says_what_was_kept = True

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum


class EndOfData(Exception):  # noqa: N818 (a signal, like StopIteration, not an error)
    """Raised by :meth:`Env.reset` of a recorded env that has no more episodes."""


def clamp(action: Any) -> np.ndarray:
    """``float32[4 + n]`` in [-1, 1]; NaN becomes 0 (centred, released), so a bad value can never be sent."""
    a = np.asarray(action, dtype=np.float32).reshape(-1)
    if not N_AXES <= a.shape[0] <= N_AXES + len(PAD_BUTTONS) or np.ndim(action) > 1:
        raise ValueError(f"an action has the {N_AXES} stick axes {AXES} and up to {len(PAD_BUTTONS)} buttons, "
                         f"got shape {np.shape(action)}")
    return np.clip(np.nan_to_num(a, nan=0.0, posinf=1.0, neginf=-1.0), -1.0, 1.0)


def stack_frames(frames: Any) -> Any:
    """``uint8[..., k, H, W, C]`` frames -> ``uint8[..., H, W, k*C]`` (frames along channels, oldest first).

    The one place the stacking layout is defined. A numpy array stays numpy; anything else
    (a ``tf.Tensor``, inside or outside a compiled function) is stacked with TensorFlow ops.
    """
    if isinstance(frames, np.ndarray):
        *lead, k, h, w, c = frames.shape
        moved = np.moveaxis(frames, -4, -2)  # [..., H, W, k, C]
        return moved.reshape(*lead, h, w, k * c)
    import tensorflow as tf

    rank = frames.shape.rank
    perm = list(range(rank - 4)) + [rank - 3, rank - 2, rank - 4, rank - 1]
    moved = tf.transpose(frames, perm)
    if frames.shape.is_fully_defined():  # two ops: an eager call (the actor, once per step) costs a tenth
        *lead, k, h, w, c = frames.shape.as_list()
        return tf.reshape(moved, [*lead, h, w, k * c])
    shape = tf.shape(frames)
    return tf.reshape(moved, tf.concat([shape[:-4], shape[-3:-1], [shape[-4] * shape[-1]]], 0))


def gather_stacked(frames: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``stack_frames(frames[ids])`` for ``uint8[N, H, W, C]`` frames and ``int[B, k]`` ids, without the copy in between.

    The replay's hot path: each pixel's ``C`` bytes move as one item (a ``void`` view), one frame
    of the stack at a time, straight into its place, which takes about a third of the time
    of gathering and then moving ``C``-byte runs. Equal to :func:`stack_frames` byte for byte.
    """
    n, h, w, c = frames.shape
    b, k = ids.shape
    pixels = np.ascontiguousarray(frames).view(np.dtype((np.void, c)))[..., 0]  # [N, H, W], one item per pixel
    out = np.empty((b, h, w, k), pixels.dtype)
    for j in range(k):
        out[..., j] = pixels[ids[:, j]]
    return out.view(np.uint8).reshape(b, h, w, k * c)


@dataclass(frozen=True)
class Step:
    """What an env hands the driver after a reset or an action.

    Attributes:
      obs: ``uint8[k, H, W, C]`` (a ``tf.Tensor`` read from the env's frame ring), the newest
        ``k`` frames, oldest first.
      first: ``obs`` opens an episode (returned by :meth:`Env.reset`).
      last: ``obs`` closes an episode; the driver resets the env next.
      truncated: with ``last``, the episode was cut by a limit the agent does not see coming (a
        Gymnasium env's own ``truncated``, against ``terminated``): the game would go on, so learning
        bootstraps past ``obs``. explorer's own episode budget (``game.episode_steps``), which the
        context's step fraction counts down in every mode, ends an episode as the game ending it does.
      t: monotonic time the newest frame reached the ring, seconds.
      info: what the env knows beyond the frames, for observers only (never an agent input):
        a recorded action, the player's position, ...
    """

    obs: Any
    first: bool = False
    last: bool = False
    t: float = 0.0
    truncated: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Env(Protocol):
    """A source of frames that takes actions: the built-in game, a live screen and pad, a recorded session."""

    frame_shape: tuple[int, int, int]

    def reset(self) -> Step:
        """Begin the next episode; the returned step has ``first`` set."""

    def step(self, action: np.ndarray | None) -> Step:
        """Apply ``action`` (``float32[4 + n]``; None: send nothing) and advance to the next observation."""

    def idle(self) -> None:
        """The driver is paused: hold the sticks neutral and keep the env alive (a short wait)."""

    def neutral(self) -> None:
        """Centre every stick and release every button, now (any thread)."""

    def stats(self) -> dict[str, Any]:
        """The env's own figures (rate, latency, dropped frames, ...)."""

    def close(self) -> None:
        """Neutral, then release everything the env holds."""


@runtime_checkable
class Actor(Protocol):
    """Picks actions from observations and takes in what followed."""

    def act(self, step: Step) -> np.ndarray | None:
        """The action for ``step.obs`` (``float32[4 + n]``), or None to send nothing."""

    def observe(self, step: Step, action: np.ndarray | None, next_step: Step) -> dict[str, float]:
        """``action`` taken on ``step`` led to ``next_step``; returns metrics (the novelty, ...)."""


@runtime_checkable
class Learner(Protocol):
    """Trains from replay, one update per :meth:`step`."""

    def ready(self) -> bool:
        """Replay holds enough to sample a batch."""

    def step(self, at: tuple[int, int] | None = None, margin: tuple[int, int] = (0, 0)) -> dict[str, float]:
        """Sample a batch and train once; returns the update's metrics.

        ``at``: train on the replay as it was at that mark; ``margin``: what another thread may add
        meanwhile, at most (see :meth:`explorer.agent.replay.Replay.sample`).
        """

    def get_weights(self) -> list[np.ndarray]:
        """The acting policy's weights, for an actor's ``set_weights``."""
