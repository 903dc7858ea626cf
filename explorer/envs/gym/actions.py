"""The pad onto any Gymnasium action space: the policy keeps one output layout, ``float32[4 + n]``.

The pad's **inputs** are the four stick axes (:data:`~explorer.core.AXES`) and the policy's buttons
(``pad.buttons``). Before mapping, an action becomes an input vector ``x``: sticks in [-1, 1], each
button 1 while it is pressed (above 0) and 0 while released, a trigger pulled by ``max(value, 0)``.

- ``Discrete``: each env action is described as a pad state (``{walk_y = 1, a = 1}``, unnamed inputs
  at rest) and the pad's state is sent as the nearest description. Sticks are read first as an
  eight-way gate: centred inside :data:`DEAD_ZONE`, else the nearest of eight directions. The
  descriptions come from the env's action meanings (ALE's joystick words, MiniGrid's ``Actions``)
  or from ``game.actions``. An action whose description needs a button the policy does not hold
  cannot be reached.
- ``Box``: each dimension is a weighted sum of the inputs (``game.actions``: ``{"0" = {walk_x = 1}}``;
  by default dimension ``i`` is input ``i``: the sticks, then the buttons), clipped to [-1, 1] and put
  on the dimension's bounds.
- ``MultiBinary`` / ``MultiDiscrete``: each dimension a weighted sum of the inputs, rounded and clipped
  to its values (by default dimension ``i`` is button ``i``, so a bit is set while its button is pressed).

A mapping that cannot be built (an env action without a known meaning, a table naming an input the
policy does not have) is an :class:`~explorer.core.ExplorerError` naming the actions and how to
write the table. This module needs only numpy; it reads spaces by their class name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from explorer.core import AXES, N_AXES, TRIGGERS, ExplorerError

#: stick deflection (0..1) below which a stick counts as centred for a Discrete action space
DEAD_ZONE = 0.3

#: gated pad states whose env action is kept (a policy holding all 14 buttons has 1.3 million)
CACHED = 65536
#: ALE's joystick words as pad states: the left stick (walk) in eight directions, FIRE on A
_JOYSTICK = re.compile(r"^(UP|DOWN)?(LEFT|RIGHT)?(FIRE)?$")
#: MiniGrid's ``Actions`` as pad states: turn with camera x, walk forward, A toggles (doors, as Doom's USE),
#: B picks up, X drops; ``done`` (a no-op in most MiniGrid games) is the centred pad
MINIGRID = {"left": {"camera_x": -1.0}, "right": {"camera_x": 1.0}, "forward": {"walk_y": 1.0},
            "pickup": {"b": 1.0}, "drop": {"x": 1.0}, "toggle": {"a": 1.0}, "done": {}}

_EXAMPLE = 'game.actions = {NOOP = {}, UP = {walk_y = 1}, FIRE = {a = 1}} (docs/gym.md)'


def joystick_state(meaning: str) -> dict[str, float] | None:
    """The pad state of an ALE action meaning (``UPRIGHTFIRE`` -> walk up-right with A), None if unknown."""
    if meaning == "NOOP":
        return {}
    m = _JOYSTICK.match(meaning)
    if m is None or not meaning:
        return None
    vertical, horizontal, fire = m.groups()
    state: dict[str, float] = {}
    if vertical:
        state["walk_y"] = 1.0 if vertical == "UP" else -1.0
    if horizontal:
        state["walk_x"] = 1.0 if horizontal == "RIGHT" else -1.0
    if fire:
        state["a"] = 1.0
    return state


def pad_inputs(action: np.ndarray, buttons: Sequence[str]) -> np.ndarray:
    """``float32[4 + n]`` action -> input vector: sticks kept, buttons 1 (pressed) or 0, triggers ``max(v, 0)``."""
    a = np.nan_to_num(np.asarray(action, np.float32).reshape(-1), nan=0.0)
    x = np.zeros(N_AXES + len(buttons), np.float32)
    x[:N_AXES] = np.clip(a[:N_AXES], -1.0, 1.0)
    for i, b in enumerate(buttons):
        v = float(a[N_AXES + i]) if N_AXES + i < len(a) else 0.0
        x[N_AXES + i] = min(max(v, 0.0), 1.0) if b in TRIGGERS else float(v > 0)
    return x


def gate(x: np.ndarray, dead_zone: float = DEAD_ZONE) -> np.ndarray:
    """Input vector with each stick read as an eight-way gate: (0, 0) inside ``dead_zone``, else the nearest
    of eight directions as -1/0/1 per axis; buttons as pressed (1) or released (0)."""
    g = np.array(x, np.float32)
    for i in (0, 2):  # camera (x, y), walk (x, y)
        sx, sy = float(g[i]), float(g[i + 1])
        if np.hypot(sx, sy) < dead_zone:
            g[i] = g[i + 1] = 0.0
        else:
            angle = np.round(np.arctan2(sy, sx) / (np.pi / 4)) * (np.pi / 4)
            g[i], g[i + 1] = float(np.round(np.cos(angle))), float(np.round(np.sin(angle)))
    g[N_AXES:] = (g[N_AXES:] > 0.5).astype(np.float32)
    return g


class ActionMap:
    """Turns the policy's ``float32[4 + n]`` actions into an env's actions (``__call__``).

    Attributes:
      kind: the action space's class name.
      inputs: the pad's inputs, in order (the four axes, then ``pad.buttons``).
      described: ``Discrete``: ``{env action: pad state}`` of every reachable action.
      unreachable: ``Discrete``: env actions no pad state reaches (their buttons are not held).
    """

    def __init__(self, space: Any, buttons: Sequence[str], table: Mapping[str, Mapping[str, float]] | None = None,
                 meanings: Sequence[str] | None = None, dead_zone: float = DEAD_ZONE):
        self.buttons = tuple(buttons)
        self.inputs = AXES + self.buttons
        self.kind = type(space).__name__
        self.dead_zone = dead_zone
        self.described: dict[int, dict[str, float]] = {}
        self.unreachable: list[str] = []
        table = dict(table or {})
        if self.kind == "Discrete":
            self._discrete(space, table, meanings)
        elif self.kind in ("Box", "MultiBinary", "MultiDiscrete"):
            self._linear(space, table)
        else:
            raise ExplorerError(f"the env's action space {space} is not one the pad maps onto (Discrete, Box, "
                                "MultiBinary, MultiDiscrete); wrap the env to one of those")

    # -- building
    def _check_state(self, where: str, state: Mapping[str, float], strict: bool = True) -> bool:
        unknown = [k for k in state if k not in self.inputs]
        if not unknown:
            return True
        if strict:
            raise ExplorerError(f"{where} names {', '.join(unknown)}, not an input of the pad ("
                                f"{', '.join(self.inputs)}): use those names, or add the button to pad.buttons")
        return False

    def _vector(self, state: Mapping[str, float]) -> np.ndarray:
        v = np.zeros(len(self.inputs), np.float32)
        for k, value in state.items():
            v[self.inputs.index(k)] = float(value)
        return v

    def _discrete(self, space: Any, table: dict[str, Mapping[str, float]], meanings: Sequence[str] | None) -> None:
        n = int(space.n)
        start = int(getattr(space, "start", 0))
        names = [str(m) for m in meanings] if meanings is not None and len(meanings) == n else None
        states: dict[int, Mapping[str, float]] = {}
        strict = bool(table)
        if table:
            for key, state in table.items():
                self._check_state(f"game.actions[{key!r}]", state)
                states[self._index(key, n, names)] = state
        elif names is not None:
            unknown: list[str] = []
            for i, name in enumerate(names):
                known = joystick_state(name) if name.isupper() else MINIGRID.get(name)
                if known is None:
                    unknown.append(name)
                else:
                    states[i] = known
            if unknown:
                raise ExplorerError(f"the env's actions {', '.join(unknown)} have no known pad state (its actions: "
                                    f"{', '.join(names)}); describe each as a pad state in game.actions, e.g. {_EXAMPLE}")
        else:
            example = ", ".join(['"0" = {}', '"1" = {walk_y = 1}', '"2" = {a = 1}'][:n])
            raise ExplorerError(f"the env's Discrete({n}) actions have no meanings the pad knows; describe each "
                                f"(by index 0..{n - 1}) as a pad state in game.actions, e.g. "
                                f"game.actions = {{{example}}} (docs/gym.md)")
        rows: list[np.ndarray] = []
        index: list[int] = []
        seen: set[bytes] = set()
        for i in sorted(states):
            label = names[i] if names is not None else str(i)
            if not self._check_state("", states[i], strict=strict):
                self.unreachable.append(label)
                continue
            vector = gate(self._vector(states[i]), self.dead_zone)
            if vector.tobytes() in seen:  # the same pad state twice: the first action keeps it
                self.unreachable.append(label)
                continue
            seen.add(vector.tobytes())
            rows.append(vector)
            index.append(i + start)
            self.described[i + start] = dict(states[i])
        self._table = np.stack(rows)
        self._index_of = np.array(index, np.int64)
        self._nearest: dict[tuple[float, ...], int] = {}  # gated pad state -> env action

    @staticmethod
    def _index(key: str, n: int, names: Sequence[str] | None) -> int:
        if names is not None and key in names:
            return list(names).index(key)
        if key.isdigit() and int(key) < n:
            return int(key)
        known = f"{', '.join(names)} or " if names is not None else ""
        raise ExplorerError(f"game.actions names the env action {key!r}, which it does not have: name {known}"
                            f"an index 0..{n - 1}")

    def _linear(self, space: Any, table: dict[str, Mapping[str, float]]) -> None:
        shape = tuple(int(s) for s in space.shape)
        dims = int(np.prod(shape)) if shape else 1
        self.shape = shape
        weights = np.zeros((dims, len(self.inputs)), np.float32)
        if table:
            for key, state in table.items():
                if not (key.isdigit() and int(key) < dims):
                    raise ExplorerError(f"game.actions names dimension {key!r} of a {self.kind} action of {dims} "
                                        f"dimensions: use indices 0..{dims - 1}, e.g. "
                                        'game.actions = {"0" = {walk_x = 1}, "1" = {walk_y = 1}}')
                self._check_state(f"game.actions[{key!r}]", state)
                weights[int(key)] = self._vector(state)
        else:
            first = 0 if self.kind == "Box" else N_AXES  # Box: the sticks, then the buttons; else the buttons
            for d in range(min(dims, len(self.inputs) - first)):
                weights[d, first + d] = 1.0
        self._weights = weights
        if self.kind == "Box":
            low = np.broadcast_to(np.asarray(space.low, np.float64), shape).reshape(-1)
            high = np.broadcast_to(np.asarray(space.high, np.float64), shape).reshape(-1)
            finite = np.isfinite(low) & np.isfinite(high)
            self._low = np.where(finite, low, -1.0)
            self._high = np.where(finite, high, 1.0)
            self._dtype = space.dtype
        elif self.kind == "MultiBinary":
            self._top = np.ones(dims, np.int64)
            self._dtype = space.dtype
        else:
            self._top = np.asarray(space.nvec, np.int64).reshape(-1) - 1
            self._start = np.asarray(getattr(space, "start", np.zeros(dims)), np.int64).reshape(-1)
            self._dtype = space.dtype

    # -- mapping
    def __call__(self, action: np.ndarray | None) -> Any:
        """The env action for ``action`` (``float32[4 + n]``; None: the centred pad)."""
        if self.kind == "Discrete":
            key = self._gate_key(action)
            index = self._nearest.get(key)
            if index is None:  # 9 x 9 x 2**n pad states: each looked up once, the first CACHED of them kept
                g = np.array(key, np.float32)
                index = int(self._index_of[int(np.argmin(((self._table - g) ** 2).sum(1)))])
                if len(self._nearest) < CACHED:
                    self._nearest[key] = index
            return index
        x = pad_inputs(np.zeros(len(self.inputs), np.float32) if action is None else action, self.buttons)
        d = self._weights @ x
        if self.kind == "Box":
            d = np.clip(d, -1.0, 1.0)
            return (self._low + (d + 1.0) * 0.5 * (self._high - self._low)).astype(self._dtype).reshape(self.shape)
        values = np.clip(np.round(d), 0, self._top).astype(np.int64)
        if self.kind == "MultiDiscrete":
            values = values + self._start
        return values.astype(self._dtype).reshape(self.shape)

    def _gate_key(self, action: np.ndarray | None) -> tuple[float, ...]:
        """:func:`gate` of :func:`pad_inputs` as a tuple, in plain Python (numpy's per-call cost on five values
        was most of the mapping's)."""
        values = [] if action is None else np.asarray(action, np.float32).reshape(-1).tolist()
        values += [0.0] * (len(self.inputs) - len(values))
        values = [0.0 if v != v else v for v in values]  # NaN is at rest
        key: list[float] = []
        for i in (0, 2):
            sx, sy = (min(max(v, -1.0), 1.0) for v in values[i:i + 2])
            if math.hypot(sx, sy) < self.dead_zone:
                key += [0.0, 0.0]
            else:
                angle = round(math.atan2(sy, sx) / (math.pi / 4)) * (math.pi / 4)
                key += [float(round(math.cos(angle))), float(round(math.sin(angle)))]
        for b, v in zip(self.buttons, values[N_AXES:], strict=False):
            key.append(1.0 if (v > 0.5 if b in TRIGGERS else v > 0) else 0.0)
        return tuple(key)

    def describe(self) -> str:
        """One line: what each reachable env action is on the pad."""
        if self.kind != "Discrete":
            return f"{self.kind}{getattr(self, 'shape', '')}: weights over {', '.join(self.inputs)}"
        parts = [f"{i}={'+'.join(f'{k}:{v:g}' for k, v in s.items()) or 'centred'}" for i, s in self.described.items()]
        return "; ".join(parts) + (f"; unreachable: {', '.join(self.unreachable)}" if self.unreachable else "")
