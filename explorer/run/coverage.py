"""Where the player went: map cells visited, for measurement only.

Coverage is the number of distinct ``cell``-sized squares of the map (64 x 64
map units by default) the player stood in. It is computed from the game's
reported position and is never shown to the agent. A position may carry a
room (a game of screens, as Montezuma's Revenge: a cell is then a square of
one room) or a third coordinate (cubes). A game that reports no position is
measured in frame cells instead (:meth:`Coverage.add_frame_cell`): distinct
coarse pictures, named by :attr:`Coverage.label` wherever they are shown.

Whatever a game reports goes in through :meth:`Coverage.add_place`, in one process and from a
worker's report alike (:func:`place`: the part of it coverage reads, small enough to ship).

A run's coverage figure, wherever it is shown (the summary line, ``summary.json``, TensorBoard, the
progress bar, each worker's summary, ``tools/bench_explore.py``), is :func:`cells_per_budget`:
:data:`FIGURE`, under the key ``cells_per_budget``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from explorer.envs.gym.positions import FRAME_CELL_LABEL, FrameCell, Position

#: what coverage counts when positions are given
MAP_CELLS = "map cells"
#: how many of the newest finished episodes the run's coverage figure covers
LAST = 20
#: the name of the run's coverage figure (:func:`cells_per_budget`), wherever it is shown
FIGURE = f"cells per episode budget (last {LAST})"
#: an episode's outcome when the player died (the built-in game's ``outcome``): it counts as a whole episode
DEATH = "death"
#: the rule :func:`cells_per_budget` counts by, kept with figures stored on disk (``tools/bench_explore.py``'s
#: results.json) so that one counted by an older rule is known: 1 counted an episode that ended in death with
#: its own steps, 2 counts it as a whole episode budget, 3 also takes a Gymnasium game's own end that pays
#: nothing (ALE's last life) as a death (2 counted it with its own steps). Raise it whenever the figure's rule changes.
FIGURE_RULE = 3


def cells_per_budget(cells: Sequence[int], lengths: Sequence[int], budget: int, last: int = LAST,
                     outcomes: Sequence[str | None] = ()) -> float:
    """A run's coverage figure: cells per episode budget over the last ``last`` finished episodes, their
    cells summed / their agent steps summed x ``budget`` (NaN before any episode ended), where an
    episode that ended in death counts with the whole budget.

    When every episode runs its whole budget this is the plain mean of cells per episode. An episode the
    game ends sooner at a goal (my_way_home's vest, a Gymnasium game's own end) counts with the steps it
    had: reaching a goal early neither lowers the figure (a plain mean would: the episode was cut short)
    nor inflates it (a short episode weighs by its length, not as one whole episode). A death ends the
    episode's exploration, so it counts as a whole episode: counted with its own steps it would credit
    the cells the agent would have found at its rate had it lived, and an agent that dies sooner would
    score higher.

    Args:
      cells: distinct cells of each finished episode, in the order they ended.
      lengths: agent steps of each of those episodes.
      budget: the agent steps an episode of the game may last (the env's ``episode_budget``:
        ``game.episode_steps``, or a Gymnasium game's own time limit where that is shorter).
      last: how many of the newest episodes count.
      outcomes: how each of those episodes ended (the env's ``outcome``: ``"death"``, ``"goal"``, ...), or
        empty when the game does not say.

    Raises:
      ValueError: ``cells``, ``lengths`` and a non-empty ``outcomes`` differ in length, or ``budget`` is not
        positive.
    """
    if len(cells) != len(lengths):
        raise ValueError(f"{len(cells)} episodes' cells but {len(lengths)} episodes' lengths")
    if len(outcomes) and len(outcomes) != len(cells):
        raise ValueError(f"{len(cells)} episodes' cells but {len(outcomes)} episodes' outcomes")
    if budget <= 0:
        raise ValueError(f"an episode budget of {budget} steps: it must be positive")
    counted = np.asarray(lengths[-last:], np.int64)
    if len(outcomes):
        died = np.asarray([o == DEATH for o in outcomes[-last:]], bool)
        counted = np.where(died, np.maximum(counted, budget), counted)
    steps = int(np.sum(counted))
    if not len(cells) or steps <= 0:  # no episode ended (or, from a file, none with steps): no figure
        return float("nan")
    return float(np.sum(np.asarray(cells[-last:], np.float64)) / steps * budget)


def place(p: Any) -> Position | FrameCell:
    """What coverage reads of a game's position: a frame cell's ``key`` (a game without positions), else
    ``x``, ``y`` and, where the game has them, ``room`` and ``z``."""
    key = getattr(p, "key", None)
    if isinstance(key, bytes):
        return p if isinstance(p, FrameCell) else FrameCell(key)
    room, z = getattr(p, "room", None), getattr(p, "z", None)
    return Position(float(p.x), float(p.y), None if room is None else int(room), None if z is None else float(z))


class Coverage:
    """Tracks positions per episode and the cells they fall in.

    Attributes:
      label: what a cell is (:data:`MAP_CELLS`, or the frame-cell label of a game without positions).
      path: every position ``(x, y)``, in order; ``path_room`` its room (None without rooms).
    """

    def __init__(self, cell: float = 64.0):
        self.cell = float(cell)
        self.label = MAP_CELLS
        self.episode_cells: set[Hashable] = set()
        self.all_cells: set[Hashable] = set()
        self.per_episode: list[int] = []  # distinct cells of each finished episode
        self.lengths: list[int] = []  # agent steps of each finished episode
        self.outcomes: list[str | None] = []  # how each finished episode ended (None: the game did not say)
        self.episode_steps = 0  # agent steps of the episode under way (counted by whoever feeds the coverage)
        self.path: list[tuple[float, float]] = []  # every position, in order
        self.path_episode: list[int] = []
        self.path_room: list[int | None] = []
        self.squares: set[tuple[int | None, int, int]] = set()  # (room, column, row) of every visited square

    def add(self, x: float, y: float, room: int | None = None, z: float | None = None) -> None:
        """A position: ``(x // cell, y // cell)``, with the room first and ``z // cell`` last when given."""
        c: tuple[int, ...] = (int(np.floor(x / self.cell)), int(np.floor(y / self.cell)))
        if room is not None:
            c = (int(room), *c)
        if z is not None:
            c = (*c, int(np.floor(z / self.cell)))
        self._add(c)
        self.squares.add((None if room is None else int(room), c[1] if room is not None else c[0],
                          c[2] if room is not None else c[1]))
        self.path.append((x, y))
        self.path_episode.append(len(self.per_episode))
        self.path_room.append(None if room is None else int(room))

    def add_place(self, p: Any) -> None:
        """What the game reported (see :func:`place`): a position, or a frame cell, labelled as such."""
        where = place(p)
        if isinstance(where, FrameCell):
            self.add_frame_cell(where.key, FRAME_CELL_LABEL)
        else:
            self.add(where.x, where.y, where.room, where.z)

    def add_frame_cell(self, key: bytes, label: str) -> None:
        """A coarse picture standing in for a place (a game without positions); ``label`` says what it is."""
        self.label = label
        self._add(key)

    def _add(self, c: Hashable) -> None:
        self.episode_cells.add(c)
        self.all_cells.add(c)

    @classmethod
    def union(cls, coverages: Sequence[Coverage]) -> Coverage:
        """The cells and squares any of ``coverages`` visited (no paths, no episodes): the layout of a
        picture of them all (:meth:`plot_xy`'s ``layout``)."""
        out = cls(coverages[0].cell if coverages else 64.0)
        for c in coverages:
            out.all_cells |= c.all_cells
            out.squares |= c.squares
            if c.label != MAP_CELLS:
                out.label = c.label
        return out

    def map_cells(self) -> list[tuple[int, int]]:
        """The visited squares to draw, ``(column, row)`` in cell units, rooms laid side by side in the order
        of their numbers (as :meth:`plot_xy`); empty for frame cells."""
        stride, first = self.room_stride(), self._first_room()
        return sorted({(cx + ((room or 0) - first) * stride, cy) for room, cx, cy in self.squares})

    def _first_room(self) -> int:
        return min((room for room, _, _ in self.squares if room is not None), default=0)

    def rooms(self) -> set[int]:
        """The rooms visited (empty for a game without rooms)."""
        return {room for room, _, _ in self.squares if room is not None}

    def room_stride(self) -> int:
        """Cell columns from room ``r``'s left edge to room ``r + 1``'s in a picture (the widest room and a gap)."""
        if not self.squares or all(room is None for room, _, _ in self.squares):
            return 0
        return max(cx for _, cx, _ in self.squares) + 2

    def plot_xy(self, layout: Coverage | None = None) -> np.ndarray:
        """``float[n, 2]`` positions to draw: room ``r``'s shifted right by ``(r - first room) * room_stride`` cells
        (the first room and the stride of ``layout``, by default this coverage's own)."""
        layout = layout or self
        xy = np.asarray(self.path, np.float64).reshape(-1, 2).copy()
        rooms = np.asarray([(r or 0) - layout._first_room() for r in self.path_room], np.float64)
        xy[:, 0] += rooms * layout.room_stride() * self.cell
        return xy

    def end_episode(self, outcome: str | None = None) -> int:
        """The episode under way ends (how: ``outcome``, None when the game does not say): its cells,
        :attr:`episode_steps` and outcome join :attr:`per_episode`, :attr:`lengths` and :attr:`outcomes`;
        returns its cells."""
        n = len(self.episode_cells)
        self.per_episode.append(n)
        self.lengths.append(self.episode_steps)
        self.outcomes.append(outcome)
        self.episode_cells = set()
        self.episode_steps = 0
        return n

    def figure(self, budget: int) -> float:
        """:func:`cells_per_budget` of the finished episodes."""
        return cells_per_budget(self.per_episode, self.lengths, budget, outcomes=self.outcomes)


def finish_episode(coverage: Coverage) -> int:
    """End a run's unfinished last episode: its cells count in the picture, not in the per-episode figures
    (:func:`coverage_summary`); returns them (0: no episode was under way)."""
    if not coverage.episode_cells:
        return 0
    cells = coverage.end_episode()
    coverage.per_episode.pop()
    coverage.lengths.pop()
    coverage.outcomes.pop()
    return cells


def coverage_summary(coverage: Coverage, unfinished: tuple[str, int], budget: int,
                     episodes: tuple[list[int], list[int], list[str | None]] | None = None) -> dict[str, Any]:
    """A run summary's coverage figures: cells and agent steps of each finished episode (``episodes``, by
    default ``coverage``'s), then the ``unfinished`` episodes' cells under their key, the episode
    budget and the run's figure over the last 20 episodes (:func:`cells_per_budget`, NaN before any),
    the distinct cells and rooms, and what the cells are.

    Args:
      coverage: what the run visited (all its workers' :meth:`Coverage.union`, for many).
      unfinished: ``(key, cells)`` of the episodes under way when the run ended (:func:`finish_episode`).
      budget: the agent steps an episode of the game may last (the env's ``episode_budget``).
      episodes: ``(cells, lengths, outcomes)`` of each finished episode, in the order they ended.
    """
    cells_per, lengths, outcomes = ((coverage.per_episode, coverage.lengths, coverage.outcomes)
                                    if episodes is None else episodes)
    key, cells = unfinished
    return {"cells_per_episode": cells_per, "episode_lengths": lengths, "episode_outcomes": outcomes, key: cells,
            "episode_budget": budget,
            "cells_per_budget": cells_per_budget(cells_per, lengths, budget, outcomes=outcomes),
            "distinct_cells": len(coverage.all_cells), "cells": coverage.label,
            "distinct_rooms": len(coverage.rooms()) or None}
