"""Built-in games: real engines shipped on PyPI, driven by the same four stick axes.

Backends are imported only when chosen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from explorer.core import ExplorerError

if TYPE_CHECKING:
    from explorer.config import Config
    from explorer.envs.doom.env import DoomEnv
    from explorer.envs.doom.game import DoomGame
    from explorer.envs.gym.env import GymEnv
    from explorer.envs.synthetic import SyntheticEnv


def make_game(config: Config) -> DoomGame:
    """The engine ``config.game.name`` names, for modes that drive its window (``play --game``)."""
    if config.game.name == "vizdoom":
        from explorer.envs.doom.game import DoomGame
        return DoomGame(config.game, config.observation)
    raise ExplorerError(f"game.name = {config.game.name} has no engine window; use game.name = vizdoom")


def make_env(config: Config) -> DoomEnv | SyntheticEnv | GymEnv:
    """The built-in game ``config.game.name`` names as a synchronous :class:`~explorer.core.Env` (explore)."""
    if config.game.name == "gym":
        from explorer.envs.gym.env import GymEnv
        return GymEnv(config.game, config.observation, config.observation.stack, config.ring.capacity,
                      config.pad.buttons)
    if config.game.name == "synthetic":
        from explorer.envs.synthetic import SyntheticEnv
        return SyntheticEnv(config.game, config.observation, config.observation.stack, config.ring.capacity)
    from explorer.envs.doom.env import DoomEnv
    return DoomEnv(make_game(config), config.observation.stack, config.ring.capacity, config.pad.buttons)
