"""Pictures written into run directories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from explorer.files import atomic_save
from explorer.run.coverage import MAP_CELLS, Coverage


def _save(fig: Any, path: str | Path, title: str = "", dpi: int = 90) -> Path:
    """Title, lay out and write ``fig`` to ``path`` whole or not at all, then free it."""
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    atomic_save(path, lambda tmp: fig.savefig(tmp, dpi=dpi))
    plt.close(fig)
    return path


def plot_trajectory(coverage: Coverage, path: str | Path, title: str = "") -> Path:
    """Draw where the player went (one colour per episode, cells visited shaded) and save a PNG."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 5.5), gridspec_kw={"width_ratios": [1.2, 1]})
    cell = coverage.cell
    for cx, cy in coverage.map_cells():
        ax.add_patch(plt.Rectangle((cx * cell, cy * cell), cell, cell, color="0.85", zorder=0))
    if coverage.path:
        xy = coverage.plot_xy()
        ep = np.asarray(coverage.path_episode)
        episodes = np.unique(ep)
        cmap = plt.get_cmap("viridis", max(len(episodes), 2))
        for i, e in enumerate(episodes):
            sel = xy[ep == e]
            ax.plot(sel[:, 0], sel[:, 1], lw=0.8, color=cmap(i), alpha=0.8)
            ax.plot(sel[0, 0], sel[0, 1], "o", ms=3, color=cmap(i))
    ax2.plot(np.arange(1, len(coverage.per_episode) + 1), coverage.per_episode, ".-")
    _label_panels(ax, ax2, coverage, "paths", "episode")  # after the data: it fixes the axes' limits
    return _save(fig, path, title, dpi=100)


def _label_panels(ax: Any, ax2: Any, layout: Coverage, paths: str, episodes: str) -> None:
    """Axes, title and labels of a coverage picture's two panels: the map (or, for a game without
    positions, a line saying so with its frame cells) and cells per episode."""
    ax.set_aspect("equal")
    ax.autoscale()
    rooms = " (rooms side by side)" if layout.room_stride() else ""
    ax.set_xlabel(f"x (map units){rooms}")
    ax.set_ylabel("y (map units)")
    if layout.label == MAP_CELLS:
        ax.set_title(f"{paths} ({len(layout.all_cells)} distinct {layout.cell:g}-unit cells)")
    else:  # a game without positions: no paths, the cells are pictures
        ax.set_axis_off()
        ax.text(0.5, 0.5, f"no positions: {len(layout.all_cells)} distinct\n{layout.label}", ha="center",
                va="center", wrap=True, transform=ax.transAxes)
    ax2.set_xlabel(episodes)
    ax2.set_ylabel("cells visited in the episode" if layout.label == MAP_CELLS else "frame cells in the episode")
    ax2.set_ylim(bottom=0)
    ax2.grid(alpha=0.3)


def plot_workers(coverages: list[Coverage], path: str | Path, title: str = "") -> Path:
    """Where each worker's player went (one colour per worker, cells any of them visited shaded, rooms side
    by side as :func:`plot_trajectory` lays them, one layout for all) and cells per episode of each worker,
    in the order its episodes ended; saves a PNG. A game without positions is said, with its frame cells."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 5.5), gridspec_kw={"width_ratios": [1.2, 1]})
    layout = Coverage.union(coverages)
    cell = layout.cell
    for cx, cy in layout.map_cells():
        ax.add_patch(plt.Rectangle((cx * cell, cy * cell), cell, cell, color="0.85", zorder=0))
    cmap = plt.get_cmap("tab10" if len(coverages) <= 10 else "viridis", max(len(coverages), 2))
    for i, cov in enumerate(coverages):
        colour = cmap(i)
        if cov.path:
            xy = cov.plot_xy(layout)
            ep = np.asarray(cov.path_episode)
            for e in np.unique(ep):
                sel = xy[ep == e]
                ax.plot(sel[:, 0], sel[:, 1], lw=0.7, color=colour, alpha=0.7)
        label = f"worker {i}" if len(coverages) <= 10 else None
        ax2.plot(np.arange(1, len(cov.per_episode) + 1), cov.per_episode, ".-", color=colour, label=label)
    _label_panels(ax, ax2, layout, "paths, a colour per worker", "episode of the worker")
    if 1 < len(coverages) <= 10:
        ax2.legend(loc="lower right", fontsize=8)
    return _save(fig, path, title, dpi=100)


def plot_history(history: dict[str, list[tuple[int, float]]], path: Path, title: str) -> Path:
    keys = [k for k in ("novelty", "critic_loss", "actor_loss", "q", "alpha") if k in history] or sorted(history)[:4]
    fig, axes = plt.subplots(len(keys) or 1, 1, figsize=(8, 2.2 * max(len(keys), 1)), sharex=True, squeeze=False)
    for ax, k in zip(axes[:, 0], keys, strict=False):
        xs, ys = zip(*history[k], strict=True)
        ax.plot(xs, ys, ".-", ms=3)
        ax.set_ylabel(k)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("transitions replayed")
    return _save(fig, path, title)


def plot_novelty(novelty: np.ndarray, recorded: np.ndarray, first: np.ndarray, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(10, 3.5))
    if len(novelty):
        ax.plot(novelty, lw=0.8, label="novelty (recomputed)")
    if np.isfinite(recorded).any():
        ax.plot(recorded, lw=0.8, alpha=0.7, label="reward (recorded)")
    for x in np.flatnonzero(first):
        ax.axvline(float(x), color="0.6", lw=0.5, ls="--")
    ax.set_xlabel("transition (dashed: episode start)")
    ax.set_ylabel("novelty")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper right")
    else:
        ax.text(0.5, 0.5, "no novelty signal and no recorded rewards", ha="center", transform=ax.transAxes)
    return _save(fig, path)


def plot_actions(policy: np.ndarray, recorded: np.ndarray, path: Path) -> Path:
    from explorer.core import AXES

    fig, axes = plt.subplots(4, 1, figsize=(10, 7), sharex=True)
    for i, ax in enumerate(axes):
        if np.isfinite(recorded[:, i]).any():
            ax.plot(recorded[:, i], lw=0.8, label="recorded")
        ax.plot(policy[:, i], lw=0.8, label="policy")
        ax.set_ylim(-1.05, 1.05)
        ax.set_ylabel(AXES[i])
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper right")
    axes[-1].set_xlabel("transition")
    return _save(fig, path)
