"""The context input: what the policy and critics know beyond their frames.

Computed here and nowhere else, from what every mode has: the previous action,
the agent step within the episode, the novelty the agent scored and, with
``learner.networks.view_strips`` or ``learner.networks.echo_units``, the frames of the
episode. So a checkpoint sees the same input in explore, play and replay.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from explorer.core import N_AXES

#: recent-novelty averages in the context, per agent step (~5 and ~20 steps)
EMA_RATES = np.array([0.8, 0.95], np.float32)


def colour_bins(frame: np.ndarray, bins: int) -> np.ndarray:
    """``int[H, W]``: the joint colour bin of each pixel of ``uint8[H, W, C]``, each channel cut into
    ``bins`` equal ranges (the bins of :func:`explorer.agent.novelty.colour_histogram`)."""
    q = np.minimum(frame.astype(np.int32) * bins // 256, bins - 1)
    weights = bins ** np.arange(frame.shape[-1] - 1, -1, -1)
    return (q * weights).sum(-1)


def strip_bins(channels: int) -> int:
    """Colour bins per channel giving about 64 joint bins whatever the channels: 4 in colour, 64 in grey."""
    return max(2, int(round(64 ** (1.0 / channels))))


def strip_colours(frame: np.ndarray, action: np.ndarray, bins: int, strips: int) -> np.ndarray:
    """``float32[strips * bins**C + dim]``: the colour histogram of each of ``strips`` vertical strips of
    ``uint8[H, W, C]`` (less the uniform share, scaled to norm 1), then ``action`` (``float32[dim]``)
    over the square root of its width: what the episode showed and what was sent, each of norm 1 or less."""
    idx = colour_bins(frame, bins)
    n = bins ** frame.shape[-1]
    hist = np.concatenate([np.bincount(idx[:, c].ravel(), minlength=n) / idx[:, c].size
                           for c in np.array_split(np.arange(idx.shape[1]), strips)])
    hist -= 1.0 / n
    act = np.asarray(action, np.float32)
    return np.concatenate([hist / (np.linalg.norm(hist) + 1e-6), act / np.sqrt(len(act))]).astype(np.float32)


def strip_projection(seed: int, rows: int, channels: int, action_dim: int, strips: int) -> tuple[int, np.ndarray]:
    """``(bins, matrix)``: the colour bins per channel of :func:`strip_bins` and a fixed ``float32[rows, n]``
    standard normal matrix over :func:`strip_colours`' ``n`` values, drawn from ``seed`` and ``channels``."""
    bins = strip_bins(channels)
    n = strips * bins**channels + action_dim
    return bins, np.random.default_rng([seed, channels]).normal(0.0, 1.0, (rows, n)).astype(np.float32)


class ViewRarity:
    """How rare the colours of each vertical strip of the view are in the episode so far.

    The episode's colour distribution is the mean of its frames' colour histograms (with one
    frame's worth of uniform prior). A strip's rarity is the mean of ``-log p`` over its pixels, ``p``
    the episode's share of the pixel's colour bin; the features are each strip's rarity less the
    strips' mean, halved and clipped to [-3, 3]: which way the view shows what the episode has not,
    a memory of the episode a feed-forward policy can steer by.

    Args:
      strips: vertical strips of the view, left to right.
      bins: colour bins per channel.
    """

    def __init__(self, strips: int, bins: int):
        self.strips, self.bins = int(strips), int(bins)
        self.reset()

    def reset(self) -> None:
        self.counts: np.ndarray | None = None  # summed colour histograms of the episode's frames
        self.frames = 0
        self.value = np.zeros(self.strips, np.float32)

    def see(self, frame: np.ndarray) -> None:
        """Score ``uint8[H, W, C]`` against the episode so far, then add it to the episode."""
        idx = colour_bins(np.asarray(frame), self.bins)
        n = self.bins ** np.asarray(frame).shape[-1]
        if self.counts is None:  # the episode's first frame sets the number of colour bins
            self.counts = np.zeros(n, np.float64)
        share = (self.counts + 1.0 / n) / (self.frames + 1.0)
        surprise = -np.log(share)[idx]  # [H, W]
        cols = np.array_split(np.arange(idx.shape[1]), self.strips)
        rarity = np.array([surprise[:, c].mean() for c in cols])
        self.value = np.clip((rarity - rarity.mean()) / 2.0, -3.0, 3.0).astype(np.float32)
        self.counts += np.bincount(idx.ravel(), minlength=n) / idx.size
        self.frames += 1

    def state(self) -> dict[str, Any]:
        return {"counts": None if self.counts is None else self.counts.tolist(), "frames": self.frames,
                "value": self.value.tolist()}

    def load(self, state: dict[str, Any]) -> None:
        self.counts = None if state["counts"] is None else np.array(state["counts"], np.float64)
        self.frames = int(state["frames"])
        self.value = np.array(state["value"], np.float32)


class EchoMemory:
    """A recurrent memory of the episode with fixed random weights (an echo state network).

    Each agent step it reads the newest frame, as the colour histogram of each of three vertical
    strips, and the action sent, and moves its state ``h`` (``float32[units]``, each in [-1, 1]) by
    ``h <- (1 - a) h + a tanh(W h + U u + b)``, the units in three groups leaking at ``a`` = 0.5,
    0.1 and 0.02 (memories of about 2, 10 and 50 steps). ``W`` (spectral radius 0.9), ``U`` and
    ``b`` are drawn once from a fixed seed, so every run, mode and checkpoint computes the same
    state from the same episode; nothing here learns and nothing is back-propagated through time.
    The actor and critics learn what to read from it, as an echo state network's readout does:
    a memory for two CPU cores, at a fraction of a millisecond a step.

    Args:
      units: size of the state.
      action_dim: width of an action.
    """

    LEAKS = (0.5, 0.1, 0.02)
    STRIPS = 3
    SEED = 20261205

    def __init__(self, units: int, action_dim: int):
        self.units, self.action_dim = int(units), int(action_dim)
        rng = np.random.default_rng(self.SEED)
        w = rng.normal(0.0, 1.0, (self.units, self.units))
        radius = np.abs(np.linalg.eigvals(w)).max()
        self.w = (0.9 * w / radius).astype(np.float32)
        self.b = rng.normal(0.0, 0.2, self.units).astype(np.float32)
        self.u: np.ndarray | None = None  # U, drawn once the frame's colour channels are known
        self.bins = 0
        self.leak = np.repeat(np.array(self.LEAKS, np.float32),
                              [len(c) for c in np.array_split(np.arange(self.units), len(self.LEAKS))])
        self.reset()

    def reset(self) -> None:
        self.value = np.zeros(self.units, np.float32)

    def _inputs(self, frame: np.ndarray, action: np.ndarray) -> np.ndarray:
        channels = frame.shape[-1]
        if self.u is None:
            self.bins, self.u = strip_projection(self.SEED, self.units, channels, self.action_dim, self.STRIPS)
        return strip_colours(frame, action, self.bins, self.STRIPS)

    def see(self, frame: np.ndarray, action: np.ndarray) -> None:
        """The episode showed ``uint8[H, W, C]`` after ``action`` (zeros at the episode's start)."""
        u = self._inputs(np.asarray(frame), action)
        if self.u is None or u.shape[0] != self.u.shape[1]:
            raise ValueError(f"learner.networks.echo_units read frames of another shape ({frame.shape}) in one run")
        pre = self.w @ self.value + self.u @ u + self.b
        self.value = ((1.0 - self.leak) * self.value + self.leak * np.tanh(pre)).astype(np.float32)

    def state(self) -> dict[str, Any]:
        return {"value": self.value.tolist()}

    def load(self, state: dict[str, Any]) -> None:
        value = np.array(state["value"], np.float32)
        if value.shape != (self.units,) or not np.all(np.abs(value) <= 1.0):
            raise ValueError(f"context.echo.value holds {value.size} values, not {self.units} in [-1, 1] "
                             "(learner.networks.echo_units)")
        self.value = value


def gru_step(state: np.ndarray, x: np.ndarray, kernel: np.ndarray, recurrent: np.ndarray,
             bias: np.ndarray) -> np.ndarray:
    """One step of a Keras GRU (sigmoid gates, ``reset_after``) in numpy: the state after input ``x``.

    ``kernel`` ``[in, 3u]``, ``recurrent`` ``[u, 3u]`` and ``bias`` ``[2, 3u]`` are the layer's weights, its
    gates in Keras's order (update, reset, candidate). A state in [-1, 1] stays there.
    """
    u = recurrent.shape[0]
    xs = x @ kernel + bias[0]
    hs = state @ recurrent + bias[1]
    z = 1.0 / (1.0 + np.exp(-(xs[:u] + hs[:u])))
    r = 1.0 / (1.0 + np.exp(-(xs[u:2 * u] + hs[u:2 * u])))
    candidate = np.tanh(xs[2 * u:] + r * hs[2 * u:])
    return (z * state + (1.0 - z) * candidate).astype(np.float32)


class RecurrentInput:
    """What the trained recurrent core reads (``learner.networks.recurrent_units``): the inputs of the last
    ``window`` agent steps, which of them belong to this episode, and the core's state before the oldest.

    Each agent step is read as the echo memory reads it (the colours of three vertical strips of the
    newest frame and the action sent), projected by a fixed random matrix onto :attr:`WIDTH` values.
    The learner runs the core, a GRU (:func:`explorer.agent.networks.build_core`), over the window from
    the stored state: training back-propagates through the window's steps, never through the CNN, and
    costs a few small matrix products per step. As a step leaves the window it moves the stored state
    one step on with the core's weights of the time (R2D2's stored state), so the core's state reaches
    back over the whole episode. The actor gives the weights (:meth:`set_weights`) whenever its
    policy's change.

    Args:
      units: the core's state size.
      window: agent steps the learner runs the core through.
      action_dim: width of an action.
    """

    WIDTH = 24
    STRIPS = 3
    SEED = 20261206
    #: largest magnitude of an input: an input is a fixed projection of two vectors of norm 1 or less
    BOUND = 10.0

    def __init__(self, units: int, window: int, action_dim: int):
        self.units, self.window, self.action_dim = int(units), int(window), int(action_dim)
        self.dim = self.window * (self.WIDTH + 1) + self.units
        self.proj: np.ndarray | None = None  # drawn once the frame's colour channels are known
        self.bins = 0
        self.weights: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.reset()

    def reset(self) -> None:
        self.inputs = np.zeros((self.window, self.WIDTH), np.float32)
        self.valid = np.zeros(self.window, np.float32)  # 1 where a step of this episode is in the window
        self.start = np.zeros(self.units, np.float32)  # the core's state before the window's oldest step

    def set_weights(self, kernel: np.ndarray, recurrent: np.ndarray, bias: np.ndarray) -> None:
        """The core's GRU weights now (``kernel [WIDTH, 3u]``, ``recurrent [u, 3u]``, ``bias [2, 3u]``)."""
        kernel, recurrent, bias = (np.asarray(w, np.float32) for w in (kernel, recurrent, bias))
        u3 = 3 * self.units
        if kernel.shape != (self.WIDTH, u3) or recurrent.shape != (self.units, u3) or bias.shape != (2, u3):
            raise ValueError(f"a recurrent core of weights {kernel.shape}, {recurrent.shape}, {bias.shape} for "
                             f"{self.units} units reading {self.WIDTH} inputs")
        self.weights = (kernel, recurrent, bias)

    def _input(self, frame: np.ndarray, action: np.ndarray) -> np.ndarray:
        channels = frame.shape[-1]
        if self.proj is None:  # inputs of about ±1
            self.bins, self.proj = strip_projection(self.SEED, self.WIDTH, channels, self.action_dim, self.STRIPS)
        u = strip_colours(frame, action, self.bins, self.STRIPS)
        if u.shape[0] != self.proj.shape[1]:
            raise ValueError(f"learner.networks.recurrent_units read frames of another shape ({frame.shape}) in one run")
        return np.clip(self.proj @ u, -self.BOUND, self.BOUND).astype(np.float32)

    def see(self, frame: np.ndarray, action: np.ndarray) -> None:
        """The episode showed ``uint8[H, W, C]`` after ``action`` (zeros at the episode's start)."""
        x = self._input(np.asarray(frame), action)
        if self.valid[0]:  # the oldest step leaves the window: fold it into the stored state
            if self.weights is None:
                raise ValueError("learner.networks.recurrent_units: the core's weights were never given "
                                 "(RecurrentInput.set_weights)")
            self.start = gru_step(self.start, self.inputs[0], *self.weights)
        self.inputs = np.roll(self.inputs, -1, axis=0)
        self.valid = np.roll(self.valid, -1)
        self.inputs[-1], self.valid[-1] = x, 1.0

    def value(self) -> np.ndarray:
        return np.concatenate([self.inputs.ravel(), self.valid, self.start]).astype(np.float32)

    def state(self) -> dict[str, Any]:
        return {"inputs": self.inputs.tolist(), "valid": self.valid.tolist(), "start": self.start.tolist()}

    def check(self, state: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming what is wrong when ``state`` is not one :meth:`state` writes for
        these settings (its sizes, finite inputs within :attr:`BOUND`, a window that fills from its
        newest end, a state in [-1, 1])."""
        try:
            inputs = np.array(state["inputs"], np.float64)
            valid = np.array(state["valid"], np.float64)
            start = np.array(state["start"], np.float64)
        except (KeyError, TypeError, ValueError):
            raise ValueError("context.recurrent needs inputs, valid and start, lists of numbers") from None
        names = "learner.networks.recurrent_window and recurrent_units"
        if inputs.shape != (self.window, self.WIDTH) or valid.shape != (self.window,) or start.shape != (self.units,):
            raise ValueError(f"context.recurrent holds inputs {list(inputs.shape)}, valid {list(valid.shape)} and "
                             f"start {list(start.shape)}, not [{self.window}, {self.WIDTH}], [{self.window}] and "
                             f"[{self.units}] ({names})")
        if not (np.isfinite(inputs).all() and np.abs(inputs).max(initial=0) <= self.BOUND):
            raise ValueError(f"context.recurrent.inputs holds values that are not finite or beyond ±{self.BOUND:g}")
        if not (np.isin(valid, (0.0, 1.0)).all() and np.all(np.diff(valid) >= 0)):
            raise ValueError("context.recurrent.valid must be 0s then 1s (the window fills from its newest end)")
        if not (np.isfinite(start).all() and np.abs(start).max(initial=0) <= 1.0):
            raise ValueError("context.recurrent.start holds values that are not finite or outside [-1, 1]")

    def load(self, state: Mapping[str, Any]) -> None:
        self.check(state)
        self.inputs = np.array(state["inputs"], np.float32)
        self.valid = np.array(state["valid"], np.float32)
        self.start = np.array(state["start"], np.float32)


class OracleMap:
    """A diagnosis, never a default: the map cells around the player that the episode has stood in.

    A ``size`` x ``size`` grid of ``cell``-sized squares centred on the player and turned with the
    player's heading (rows ahead to behind, columns left to right), each 1 where the episode has
    stood in the map cell under the square's centre, else 0: the memory of where it has been that
    an agent with perfect place recognition would carry. It reads the position the game reports
    (``info["position"]``), which the agent never sees otherwise; learning with it tells how far
    a memory of the episode could take the learner.

    Args:
      size: squares per side (odd: the player's own cell in the middle).
      cell: side of a cell, map units (the coverage figures' 64).
    """

    def __init__(self, size: int, cell: float):
        self.size, self.cell = int(size), float(cell)
        half = self.size // 2
        ahead, right = np.meshgrid(np.arange(half, -half - 1, -1), np.arange(-half, half + 1), indexing="ij")
        self._ahead, self._right = ahead.ravel() * self.cell, right.ravel() * self.cell  # [size * size], map units
        self.reset()

    def reset(self) -> None:
        self.visited: set[tuple[int, int]] = set()
        self.value = np.zeros(self.size * self.size, np.float32)

    def _cell(self, x: Any, y: Any) -> Any:
        return np.floor(np.asarray(x) / self.cell).astype(np.int64), np.floor(np.asarray(y) / self.cell).astype(np.int64)

    def see(self, info: Mapping[str, Any]) -> None:
        """The player stands where ``info["position"]`` says (x, y in map units, angle in degrees)."""
        where = info.get("position")
        if where is None:
            raise ValueError("learner.networks.oracle_map reads the player's position, which this game does not report: use "
                             "it with the built-in game (game.name = vizdoom or synthetic)")
        cx, cy = self._cell(where.x, where.y)
        self.visited.add((int(cx), int(cy)))
        a = np.radians(where.angle)
        fx, fy = np.cos(a), np.sin(a)  # ahead; right is (fy, -fx)
        gx, gy = self._cell(where.x + self._ahead * fx + self._right * fy, where.y + self._ahead * fy - self._right * fx)
        self.value = np.array([(int(i), int(j)) in self.visited for i, j in zip(gx, gy, strict=True)], np.float32)

    def state(self) -> dict[str, Any]:
        return {"visited": sorted(self.visited), "value": self.value.tolist()}

    def load(self, state: dict[str, Any]) -> None:
        self.visited = {(int(i), int(j)) for i, j in state["visited"]}
        self.value = np.array(state["value"], np.float32)


class Proposal:
    """The prior's proposal a residual policy corrects (``learner.actions.residual``): ``float32[dim + 1]``.

    Sticks and buttons drawn as ``sticky_prior`` draws them (uniform in [-1, 1], moved by the prior,
    in squashed units), held for ``hold`` agent steps, then the share of the hold still to come. It
    is drawn when first asked for (:meth:`value`), so a second reset at the same episode start draws
    nothing; its generator is seeded from ``learner.seed`` and kept in checkpoints.

    Args:
      prior: the stick range's prior in squashed units (``StickRange.prior``), buttons' included.
      hold: agent steps a proposal is held.
      seed: seeds the draws.
    """

    def __init__(self, prior: np.ndarray, hold: int, seed: int):
        self.prior = np.asarray(prior, np.float32)
        self.hold = int(hold)
        self.rng = np.random.default_rng(seed)
        self.reset()

    def reset(self) -> None:
        self.action = np.zeros(len(self.prior), np.float32)
        self.left = 0  # agent steps the proposal in force is held for still, this one included; 0: draw one

    def value(self) -> np.ndarray:
        if self.left <= 0:
            draw = self.rng.uniform(-1.0, 1.0, len(self.prior)) + self.prior
            self.action, self.left = np.clip(draw, -1.0, 1.0).astype(np.float32), self.hold
        return np.concatenate([self.action, [self.left / self.hold]]).astype(np.float32)

    def advance(self) -> None:
        self.value()  # a step taken without asking still used the proposal of its time
        self.left -= 1

    def state(self) -> dict[str, Any]:
        return {"action": self.action.tolist(), "left": self.left, "rng": self.rng.bit_generator.state}

    def load(self, state: dict[str, Any]) -> None:
        self.action, self.left = np.array(state["action"], np.float32), int(state["left"])
        self.rng.bit_generator.state = state["rng"]


class Context:
    """Previous action, episode-step fraction, two recent-novelty averages and, with ``view_strips``,
    the :class:`ViewRarity` of the newest frame, with ``oracle_map`` the :class:`OracleMap`, with a
    ``proposal`` the :class:`Proposal` in force, with ``echo_units`` the :class:`EchoMemory`'s state and,
    last, with ``recurrent`` the :class:`RecurrentInput`: ``float32[dim]``.

    The step fraction is ``min(episode_step / horizon, 1)`` with ``horizon`` the agent steps of
    an episode of the built-in game (``game.episode_steps``), in every mode: a live game has no
    episode length of its own, and the fraction must mean the same thing wherever a checkpoint
    goes. The novelty averages tell a feed-forward critic whether the episode has lately been
    going somewhere new. With ``enabled`` false the context is a single constant 0.

    Args:
      enabled: ``learner.networks.context``.
      horizon: agent steps the step fraction counts to.
      action_dim: width of an action (the four sticks and the policy's buttons).
      view_strips: ``learner.networks.view_strips`` (0: none).
      bins: colour bins per channel of the view rarity (``novelty.histogram_bins``).
      oracle_map: ``learner.networks.oracle_map``, squares per side of the :class:`OracleMap` (0: none; a diagnosis).
      cell: side of the oracle map's cells, map units.
      proposal: the prior's proposal a residual policy corrects (``learner.actions.residual``; None: none).
      echo_units: ``learner.networks.echo_units``, the :class:`EchoMemory`'s state size (0: none).
      recurrent: ``(learner.networks.recurrent_units, recurrent_window)``, the :class:`RecurrentInput`'s
        (units 0: none).
    """

    def __init__(self, enabled: bool, horizon: int, action_dim: int = N_AXES, view_strips: int = 0, bins: int = 6,
                 oracle_map: int = 0, cell: float = 64.0, proposal: Proposal | None = None, echo_units: int = 0,
                 recurrent: tuple[int, int] = (0, 0)):
        self.enabled = enabled
        self.horizon = int(horizon)
        self.action_dim = int(action_dim)
        self.view = ViewRarity(view_strips, bins) if enabled and view_strips else None
        self.oracle = OracleMap(oracle_map, cell) if enabled and oracle_map else None
        self.proposal = proposal if enabled else None
        self.echo = EchoMemory(echo_units, action_dim) if enabled and echo_units else None
        units, window = recurrent
        self.recurrent = RecurrentInput(units, window, action_dim) if enabled and units else None
        if self.proposal is not None and len(self.proposal.prior) != self.action_dim:
            raise ValueError(f"a proposal of {len(self.proposal.prior)} values for actions of {self.action_dim}")
        extra = (view_strips if self.view else 0) + (oracle_map**2 if self.oracle else 0)
        #: where the proposal's action starts in :meth:`value` (None: no proposal)
        self.proposal_at = self.action_dim + 3 + extra if self.proposal is not None else None
        extra += self.action_dim + 1 if self.proposal is not None else 0
        extra += echo_units if self.echo is not None else 0
        extra += self.recurrent.dim if self.recurrent is not None else 0
        self.dim = self.action_dim + 3 + extra if enabled else 1
        self.episode_step = 0
        self.reset()

    @property
    def reads_frames(self) -> bool:
        """Whether :meth:`reset` and :meth:`advance` need the frames (``view_strips``, ``echo_units``)."""
        return self.view is not None or self.echo is not None or self.recurrent is not None

    def reset(self, frame: np.ndarray | None = None, info: Mapping[str, Any] | None = None) -> None:
        """A new episode, whose first frame (``uint8[H, W, C]``) is ``frame`` and whose first report is
        ``info`` when given."""
        stepped = self.episode_step > 0
        self.prev_action = np.zeros(self.action_dim, np.float32)
        self.episode_step = 0
        self.novelty_ema = np.ones(2, np.float32)
        if self.view is not None:
            self.view.reset()
            if frame is not None:
                self.view.see(frame)
        if self.oracle is not None:
            self.oracle.reset()
            if info is not None:
                self.oracle.see(info)
        if self.proposal is not None and stepped:  # a second reset at the same start keeps the proposal drawn
            self.proposal.reset()
        if self.echo is not None:
            self.echo.reset()
            if frame is not None:
                self.echo.see(frame, self.prev_action)
        if self.recurrent is not None:
            self.recurrent.reset()
            if frame is not None:
                self.recurrent.see(frame, self.prev_action)

    def value(self) -> np.ndarray:
        """The context now: ``float32[dim]``."""
        if not self.enabled:
            return np.zeros(1, np.float32)
        frac = min(self.episode_step / self.horizon, 1.0) if self.horizon else 0.0
        parts = [self.prev_action, np.array([frac], np.float32), self.novelty_ema]
        if self.view is not None:
            parts.append(self.view.value)
        if self.oracle is not None:
            parts.append(self.oracle.value)
        if self.proposal is not None:
            parts.append(self.proposal.value())
        if self.echo is not None:
            parts.append(self.echo.value)
        if self.recurrent is not None:  # last: the core reads the context's tail (explorer.agent.networks.build_core)
            parts.append(self.recurrent.value())
        return np.concatenate(parts).astype(np.float32)

    def advance(self, action: np.ndarray, novelty: float, frame: np.ndarray | None = None,
                info: Mapping[str, Any] | None = None) -> None:
        """``action`` was taken, scored ``novelty`` and led to ``frame`` (``uint8[H, W, C]``, needed
        with ``view_strips`` and ``echo_units``), reported with ``info`` (needed with ``oracle_map``): one agent
        step on."""
        self.novelty_ema = (EMA_RATES * self.novelty_ema + (1 - EMA_RATES) * novelty).astype(np.float32)
        self.prev_action = np.asarray(action, np.float32)
        self.episode_step += 1
        if self.view is not None:
            if frame is None:
                raise ValueError("learner.networks.view_strips needs the frame each action led to")
            self.view.see(frame)
        if self.oracle is not None:
            self.oracle.see(info or {})
        if self.proposal is not None:
            self.proposal.advance()
        if self.echo is not None:
            if frame is None:
                raise ValueError("learner.networks.echo_units needs the frame each action led to")
            self.echo.see(frame, self.prev_action)
        if self.recurrent is not None:
            if frame is None:
                raise ValueError("learner.networks.recurrent_units needs the frame each action led to")
            self.recurrent.see(frame, self.prev_action)

    def state(self) -> dict[str, Any]:
        s = {"prev_action": self.prev_action.tolist(), "episode_step": self.episode_step,
             "novelty_ema": self.novelty_ema.tolist()}
        if self.view is not None:
            s["view"] = self.view.state()
        if self.oracle is not None:
            s["oracle_map"] = self.oracle.state()
        if self.proposal is not None:
            s["proposal"] = self.proposal.state()
        if self.echo is not None:
            s["echo"] = self.echo.state()
        if self.recurrent is not None:
            s["recurrent"] = self.recurrent.state()
        return s

    def load(self, state: dict[str, Any]) -> None:
        self.prev_action = np.array(state["prev_action"], np.float32)
        self.episode_step = int(state["episode_step"])
        self.novelty_ema = np.array(state["novelty_ema"], np.float32)
        if self.view is not None:
            if "view" in state:
                self.view.load(state["view"])
            else:  # a checkpoint written without view_strips: the episode's colours start afresh
                self.view.reset()
        if self.oracle is not None:
            if "oracle_map" in state:
                self.oracle.load(state["oracle_map"])
            else:
                self.oracle.reset()
        if self.proposal is not None:
            if "proposal" in state:
                self.proposal.load(state["proposal"])
            else:  # written without learner.actions.residual: the next step draws a proposal
                self.proposal.reset()
        if self.echo is not None:
            if "echo" in state:
                self.echo.load(state["echo"])
            else:  # written without echo_units: the memory starts empty
                self.echo.reset()
        if self.recurrent is not None:
            if "recurrent" in state:
                self.recurrent.load(state["recurrent"])
            else:  # written without recurrent_units: the core starts the episode afresh
                self.recurrent.reset()
