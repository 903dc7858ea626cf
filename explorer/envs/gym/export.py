"""explorer's own games as Gymnasium environments, for other libraries.

Importing this module registers:

- ``explorer/Doom-v0``: ViZDoom as explorer plays it (headless, the pad bridge). Keyword arguments are
  ``game.*`` settings (``scenario``, ``map``, ``wad``, ``episode_steps``, ``frame_skip``, ``seed`` ...),
  plus ``width``, ``height``, ``grayscale`` (``observation.*``) and ``buttons`` (``pad.buttons``).
- ``explorer/LiveWindow-v0``: a live game behind the virtual pad: ``window`` (a title to capture) or
  ``region`` (``(left, top, width, height)``), ``hz`` (steps per second), ``dry_run`` (send nothing),
  ``width``/``height``/``grayscale``/``buttons`` as above; ``screen`` and ``pad`` objects replace the
  capture and the pad (tests, the fakes in :mod:`explorer.testing`).

Either is made with ``gymnasium.make("explorer.envs.gym.export:explorer/Doom-v0")`` (the module part
imports this one). Observations are the newest frame, ``uint8[H, W, C]`` (stack them with
``FrameStackObservation``); an action is ``{"sticks": float32[4] in [-1, 1], "buttons": int8[n]}``
(sticks in :data:`~explorer.core.AXES` order, a button pressed while 1). An episode the game ends
(Doom's goal or death) is ``terminated``; one cut by ``episode_steps`` is ``truncated``. A live game
never ends. :meth:`PadEnv.close` leaves the pad neutral, sticks centred and every button released,
and so does a step that raises; a live pad also goes neutral when no step arrives within
``control.watchdog_ticks`` ticks (the caller's code stalled). An env never closed is closed the same
way when it is dropped or the interpreter exits: a script ended by Ctrl-C anywhere in its loop (in a
step or in its own code between two) leaves the pad neutral.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from explorer.config import Config, load
from explorer.core import N_AXES, Env

DOOM_ID = "explorer/Doom-v0"
LIVE_ID = "explorer/LiveWindow-v0"


def _config(sections: dict[str, dict[str, Any]]) -> Config:
    """The defaults with these settings, validated as a config file's would be (one-line ConfigError)."""
    overrides = [f"{section}.{key}={json.dumps(list(value) if isinstance(value, tuple) else value)}"
                 for section, values in sections.items() for key, value in values.items()]
    return load(None, overrides)


def _observation(width: int | None, height: int | None, grayscale: bool | None) -> dict[str, Any]:
    given = {"width": width, "height": height, "grayscale": grayscale}
    return {k: v for k, v in given.items() if v is not None}


def _release(env: Env) -> None:
    """The pad neutral (sticks centred, buttons released), then the env closed."""
    try:
        env.neutral()
    finally:
        env.close()


class PadEnv(gymnasium.Env):
    """An explorer :class:`~explorer.core.Env` as a Gymnasium env: the newest frame out, the pad's sticks
    and buttons in.

    Args:
      env: the explorer env (its frames ``uint8[H, W, C]``, actions of ``4 + len(buttons)`` values).
      buttons: the pad buttons of an action, after its four sticks.
      render_mode: None or ``"rgb_array"`` (the newest frame).
      reseed: what ``reset(seed=...)`` calls to seed the env's next episode (None: the seed only seeds
        :attr:`np_random`; a live game has no seed).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 35}

    def __init__(self, env: Env, buttons: Sequence[str], render_mode: str | None = None,
                 reseed: Callable[[int], None] | None = None):
        self.env = env
        self.reseed = reseed
        self.buttons = tuple(buttons)
        self.render_mode = render_mode
        self.observation_space = spaces.Box(0, 255, tuple(env.frame_shape), np.uint8)
        parts: dict[str, spaces.Space[Any]] = {"sticks": spaces.Box(-1.0, 1.0, (N_AXES,), np.float32)}
        if self.buttons:
            parts["buttons"] = spaces.MultiBinary(len(self.buttons))
        self.action_space = spaces.Dict(parts)
        self._frame: np.ndarray | None = None
        # once: by close(), when this object is dropped, or at the interpreter's exit (an unhandled Ctrl-C included)
        self._release = weakref.finalize(self, _release, env)

    def _pad_action(self, action: Any) -> np.ndarray:
        sticks = np.asarray(action["sticks"], np.float32).reshape(N_AXES)
        pressed = np.asarray(action.get("buttons", np.zeros(len(self.buttons))), np.float32).reshape(-1)
        if pressed.shape[0] != len(self.buttons):
            raise ValueError(f"buttons has {len(self.buttons)} entries ({', '.join(self.buttons)}), got {pressed.shape[0]}")
        return np.concatenate([sticks, np.where(pressed > 0.5, 1.0, -1.0)]).astype(np.float32)

    def _out(self, step: Any) -> tuple[np.ndarray, dict[str, Any]]:
        self._frame = np.asarray(step.obs[-1].numpy(), np.uint8)
        info: dict[str, Any] = {}
        p = step.info.get("position")
        if p is not None and hasattr(p, "x"):
            info["position"] = np.array([p.x, p.y], np.float64)  # for coverage, as explorer measures it
        return self._frame, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None and self.reseed is not None:
            self.reseed(seed)
        try:
            return self._out(self.env.reset())
        except BaseException:
            self.env.neutral()
            raise

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        try:
            step = self.env.step(self._pad_action(action))
        except BaseException:  # a step that raises leaves the pad as close() would
            self.env.neutral()
            raise
        frame, info = self._out(step)
        # For another library, explorer's own budget (Doom's "timeout": episode_steps ran out) is a time limit,
        # which it cannot see coming: truncated, as Gymnasium's TimeLimit would say.
        cut = step.truncated or (step.last and getattr(self.env, "outcome", None) == "timeout")
        return frame, 0.0, bool(step.last and not cut), bool(cut), info

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array" or self._frame is None:
            return None
        return np.repeat(self._frame, 3, axis=2) if self._frame.shape[2] == 1 else self._frame

    def close(self) -> None:
        self._release()


def make_doom(render_mode: str | None = None, buttons: Sequence[str] = ("a",), width: int | None = None,
              height: int | None = None, grayscale: bool | None = None, **game: Any) -> PadEnv:
    """``explorer/Doom-v0``: ViZDoom headless, one engine step (``frame_skip`` tics) per env step."""
    from explorer.envs.doom.env import DoomEnv
    from explorer.envs.doom.game import DoomGame

    config = _config({"game": {**game, "name": "vizdoom"}, "observation": _observation(width, height, grayscale),
                      "pad": {"buttons": list(buttons)}})
    doom = DoomEnv(DoomGame(config.game, config.observation), 1, 4, config.pad.buttons)
    return PadEnv(doom, config.pad.buttons, render_mode, reseed=doom.seed)


def make_live(render_mode: str | None = None, window: str = "", region: Sequence[int] | None = None,
              hz: float | None = None, dry_run: bool = False, buttons: Sequence[str] = ("a",),
              width: int | None = None, height: int | None = None, grayscale: bool | None = None,
              screen: Any = None, pad: Any = None) -> PadEnv:
    """``explorer/LiveWindow-v0``: a live game captured from a window or region, played on the virtual pad
    in real time (``hz`` steps per second, ``control.hz`` by default), with the pad's watchdog."""
    from explorer.envs.live.capture import make_screen
    from explorer.envs.live.env import LiveEnv
    from explorer.envs.live.pad import make_pad

    capture: dict[str, Any] = {}
    if window:
        capture = {"source": "window", "window_title": window}
    elif region is not None:
        left, top, w, h = (int(v) for v in region)
        capture = {"source": "region", "left": left, "top": top, "width": w, "height": h}
    control = {"hz": float(hz)} if hz is not None else {}
    config = _config({"capture": capture, "control": control, "observation": _observation(width, height, grayscale),
                      "pad": {"buttons": list(buttons)}})
    c = config.control
    screen = screen if screen is not None else make_screen(config.capture, config.observation)
    pad = pad if pad is not None else make_pad(config.pad, dry_run)
    live = LiveEnv(screen, pad, stack=1, ring_capacity=4, capture_fps=config.capture.fps, hz=c.hz,
                   blank_s=config.capture.blank_seconds, stall_s=config.capture.stall_seconds,
                   watchdog_s=c.watchdog_ticks / c.hz)
    return PadEnv(live, config.pad.buttons, render_mode)


def register() -> None:
    """Register :data:`DOOM_ID` and :data:`LIVE_ID` with Gymnasium (again: nothing changes)."""
    registry = gymnasium.envs.registration.registry
    if DOOM_ID not in registry:
        gymnasium.register(DOOM_ID, entry_point=f"{__name__}:make_doom")
    if LIVE_ID not in registry:
        gymnasium.register(LIVE_ID, entry_point=f"{__name__}:make_live")


register()

__all__ = ["DOOM_ID", "LIVE_ID", "PadEnv", "make_doom", "make_live", "register"]
