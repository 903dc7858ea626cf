"""Where the player went: map cells visited, for measurement only.

Coverage is the number of distinct ``cell``-sized squares of the map (64 x 64
map units by default) the player stood in. It is computed from the game's
reported position and is never shown to the agent.
"""

from __future__ import annotations

import numpy as np


class Coverage:
    """Tracks positions per episode and the cells they fall in."""

    def __init__(self, cell: float = 64.0):
        self.cell = float(cell)
        self.episode_cells: set[tuple[int, int]] = set()
        self.all_cells: set[tuple[int, int]] = set()
        self.per_episode: list[int] = []  # distinct cells of each finished episode
        self.path: list[tuple[float, float]] = []  # every position, in order
        self.path_episode: list[int] = []

    def add(self, x: float, y: float) -> None:
        c = (int(np.floor(x / self.cell)), int(np.floor(y / self.cell)))
        self.episode_cells.add(c)
        self.all_cells.add(c)
        self.path.append((x, y))
        self.path_episode.append(len(self.per_episode))

    def end_episode(self) -> int:
        n = len(self.episode_cells)
        self.per_episode.append(n)
        self.episode_cells = set()
        return n

    def recent_mean(self, last: int = 20) -> float:
        """Mean cells per episode over the last ``last`` finished episodes (NaN before any)."""
        if not self.per_episode:
            return float("nan")
        return float(np.mean(self.per_episode[-last:]))
