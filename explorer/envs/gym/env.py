"""A Gymnasium environment as an :class:`~explorer.core.Env`: pixels in, the pad mapped onto its actions.

Frames are the env's pixel observations when it gives them (an ``uint8[H, W, 3]``, ``[H, W, 1]`` or
``[H, W]`` image), else ``render()`` in ``rgb_array`` mode (MiniGrid's symbolic observations); each is
resized to the observation shape (:func:`~explorer.envs.geometry.to_observation`) and pushed into a frame
ring, as every env's frames are. Actions go through an :class:`~explorer.envs.gym.actions.ActionMap`.

An episode ends when the game ends it (Gymnasium's ``terminated``: nothing follows, so no bootstrap),
when the env cuts it (``truncated``: the game goes on, so learning bootstraps; :attr:`Step.truncated
<explorer.core.Step>`) or after ``game.episode_steps`` steps, the budget the context's step fraction
counts down, which ends it as the game ending does (also when the env cuts it at that step). The env's reward and its info stay out of the observation; ``info["position"]`` is for
coverage only (:mod:`explorer.envs.gym.positions`).
"""

from __future__ import annotations

import importlib
import time
from typing import Any

import numpy as np

from explorer.config import GameConfig, ObservationConfig
from explorer.core import ExplorerError, Step
from explorer.envs.geometry import observation_shape, to_observation
from explorer.envs.gym.actions import ActionMap
from explorer.envs.gym.positions import FrameCell, Position, frame_cell, position_reader
from explorer.envs.ring import FrameRing

INSTALL = "pip install -e '.[gym]'"


class GymError(ExplorerError):
    """The Gymnasium game cannot be made with this configuration."""


def default_module(game_id: str) -> str:
    """The module that registers ``game_id``'s namespace, where it is obvious (empty otherwise)."""
    name = game_id.rsplit("/", 1)[-1]
    if game_id.startswith("ALE/"):
        return "ale_py"
    if name.startswith(("MiniGrid-", "BabyAI-")):
        return "minigrid"
    return ""


def default_kwargs(game_id: str) -> dict[str, Any]:
    """``gymnasium.make`` keywords a game gets unless ``game.kwargs`` sets them: MiniGrid renders 8-pixel
    tiles (its default 32 costs 16 times the pixels, all resized away)."""
    return {"tile_size": 8} if default_module(game_id) == "minigrid" else {}


def import_gymnasium() -> Any:
    try:
        import gymnasium
    except ImportError:
        raise GymError(f"game.name = gym needs Gymnasium, which is not installed: {INSTALL}") from None
    return gymnasium


def make(game: GameConfig, render: bool = True) -> Any:
    """``gymnasium.make(game.id, **kwargs)`` after importing ``game.module``; one-line errors otherwise."""
    gym = import_gymnasium()
    module = game.module or default_module(game.id)
    if module:
        try:
            mod = importlib.import_module(module)
        except ImportError as err:
            raise GymError(f"game.module = {module} cannot be imported ({err}), so game.id = {game.id} is not "
                           f"registered: {INSTALL} (ale-py, minigrid), or install the package that registers it") from None
        if hasattr(gym, "register_envs"):
            gym.register_envs(mod)
    kwargs = {**default_kwargs(game.id), **game.kwargs}
    if render:
        kwargs.setdefault("render_mode", "rgb_array")
    try:
        return gym.make(game.id, **kwargs)
    except gym.error.Error as err:
        hint = f"set game.module to the package that registers it ({INSTALL} brings ale_py and minigrid)"
        raise GymError(f"game.id = {game.id} is not a registered Gymnasium id ({err}): {hint}") from None
    except TypeError as err:
        said = str(err).split(" was raised from the environment creator")[0]  # the rest repeats the kwargs
        raise GymError(f"game.kwargs = {game.kwargs} is not taken by {game.id}: {said}") from None


def is_image(space: Any) -> bool:
    """An observation space of pictures: ``uint8[H, W]``, ``[H, W, 1]`` or ``[H, W, 3]``, at least 16 x 16."""
    shape = getattr(space, "shape", None)
    if type(space).__name__ != "Box" or shape is None or getattr(space, "dtype", None) != np.uint8:
        return False
    return (len(shape) == 2 or (len(shape) == 3 and shape[2] in (1, 3))) and min(shape[:2]) >= 16


def meanings(env: Any) -> list[str] | None:
    """The env's names of its Discrete actions: ALE's ``get_action_meanings()``, MiniGrid's ``Actions``."""
    unwrapped = env.unwrapped
    if hasattr(unwrapped, "get_action_meanings"):
        return [str(m) for m in unwrapped.get_action_meanings()]
    actions = getattr(unwrapped, "actions", None)
    if actions is not None and hasattr(actions, "__members__"):
        return [a.name for a in sorted(actions, key=int)]
    return None


def rgb(image: Any) -> np.ndarray:
    """An env picture as ``uint8[H, W, 3]``."""
    a = np.asarray(image)
    if a.dtype != np.uint8:
        a = np.clip(a, 0, 255).astype(np.uint8)
    if a.ndim == 2:
        a = a[..., None]
    if a.ndim != 3 or a.shape[2] not in (1, 3, 4):
        raise GymError(f"the env's picture has shape {a.shape}, not an image [H, W, 3]")
    if a.shape[2] == 1:
        a = np.repeat(a, 3, axis=2)
    return np.ascontiguousarray(a[..., :3])


class GymEnv:
    """A Gymnasium env behind the pad; an :class:`~explorer.core.Env`.

    Args:
      game: ``id``, ``module``, ``kwargs``, ``actions``, ``position_key``, ``cell``, ``episode_steps``, ``seed``.
      observation: frame size and colour.
      stack: frames per observation ``k``.
      ring_capacity: frames the ring holds.
      buttons: the pad buttons of an action after its four sticks (``pad.buttons``).
      env: an env made already (tests, tools); made from ``game`` otherwise.
    """

    def __init__(self, game: GameConfig, observation: ObservationConfig, stack: int, ring_capacity: int,
                 buttons: tuple[str, ...] = (), env: Any = None):
        self.config = game
        self.obs_config = observation
        self.env = env if env is not None else make(game)
        try:
            self.pixels = is_image(self.env.observation_space)
            self.actions = ActionMap(self.env.action_space, buttons, game.actions, meanings(self.env))
            self.read_position, own_cell = position_reader(game.id, game.position_key)
            self.cell = game.cell or own_cell
            # agent steps an episode may last: game.episode_steps, or the game's own time limit where
            # Gymnasium knows it (a registered max_episode_steps) and it is shorter
            limit = getattr(self.env.spec, "max_episode_steps", None)
            self.episode_budget = min(game.episode_steps, limit) if limit else game.episode_steps
            self.stack = stack
            self.frame_shape = observation_shape(observation)
            self.ring = FrameRing(ring_capacity, self.frame_shape)
        except BaseException:
            self.env.close()
            raise
        self.frame_cells: bool | None = None  # decided at the first reset: the game reports no position
        self.episode = -1
        self.t = 0
        self.outcome: str | None = None
        self.total_reward = 0.0

    def _picture(self, obs: Any) -> np.ndarray:
        if self.pixels:
            return rgb(obs)
        picture = self.env.render()
        if picture is None:
            raise GymError(f"game.id = {self.config.id} gives neither pixel observations nor render() pictures in "
                           "rgb_array mode; give game.kwargs = {render_mode = \"rgb_array\"} or wrap it")
        return rgb(picture)

    def _where(self, picture: np.ndarray, info: Any) -> Position | FrameCell:
        if self.frame_cells is None:
            self.frame_cells = self.read_position(self.env, info) is None
        if not self.frame_cells:
            p = self.read_position(self.env, info)
            if p is not None:
                return p
        return frame_cell(picture)

    def _step(self, obs: Any, info: Any, reward: float = 0.0, first: bool = False, last: bool = False,
              truncated: bool = False) -> Step:
        picture = self._picture(obs)
        self.ring.push(to_observation(picture, self.obs_config))
        where = self._where(picture, info)
        return Step(self.ring.latest(self.stack), first=first, last=last, truncated=truncated, t=time.monotonic(),
                    info={"position": where, "reward": float(reward)})

    def reset(self) -> Step:
        self.episode += 1
        self.t = 0
        self.outcome = None
        if self.episode == 0:
            obs, info = self.env.reset(seed=self.config.seed)
            self.env.action_space.seed(self.config.seed)
        else:
            obs, info = self.env.reset()
        self.ring.reset()
        return self._step(obs, info, first=True)

    def step(self, action: np.ndarray | None) -> Step:
        obs, reward, terminated, truncated, info = self.env.step(self.actions(action))
        self.t += 1
        self.total_reward += float(reward)
        cut = self.t >= self.config.episode_steps
        last = bool(terminated or truncated or cut)
        if last:
            # A game's own end is a goal when its last step pays (MiniGrid's goal), else a death (ALE's last life):
            # the coverage figure counts a death as a whole episode budget (explorer.run.coverage).
            self.outcome = (("goal" if float(reward) > 0 else "death") if terminated
                            else "truncated" if truncated else "timeout")
        return self._step(obs, info, reward, last=last, truncated=bool(truncated and not terminated and not cut))

    def idle(self) -> None:
        time.sleep(0.05)

    def neutral(self) -> None:
        """Nothing is held between steps: an action acts only on the step it is sent with."""

    def stats(self) -> dict[str, Any]:
        return {"episodes_started": self.episode + 1, "env_reward": self.total_reward}

    def close(self) -> None:
        self.env.close()
