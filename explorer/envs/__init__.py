"""Built-in games: real engines shipped on PyPI, driven by the same four stick axes.

Backends are imported only when chosen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from explorer.config import Config
    from explorer.envs.vizdoom import DoomGame


def make_game(config: Config) -> DoomGame:
    """The built-in game named by ``config.game.name``."""
    if config.game.name == "vizdoom":
        from explorer.envs.vizdoom import DoomGame
        return DoomGame(config.game, config.observation)
    raise ValueError(f"unknown game {config.game.name!r}")
