"""Pictures written into run directories."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from explorer.run.coverage import Coverage


def plot_trajectory(coverage: Coverage, path: str | Path, title: str = "") -> Path:
    """Draw where the player went (one colour per episode, cells visited shaded) and save a PNG."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 5.5), gridspec_kw={"width_ratios": [1.2, 1]})
    cell = coverage.cell
    for cx, cy in coverage.all_cells:
        ax.add_patch(plt.Rectangle((cx * cell, cy * cell), cell, cell, color="0.85", zorder=0))
    if coverage.path:
        xy = np.asarray(coverage.path)
        ep = np.asarray(coverage.path_episode)
        episodes = np.unique(ep)
        cmap = plt.get_cmap("viridis", max(len(episodes), 2))
        for i, e in enumerate(episodes):
            sel = xy[ep == e]
            ax.plot(sel[:, 0], sel[:, 1], lw=0.8, color=cmap(i), alpha=0.8)
            ax.plot(sel[0, 0], sel[0, 1], "o", ms=3, color=cmap(i))
    ax.set_aspect("equal")
    ax.autoscale()
    ax.set_xlabel("x (map units)")
    ax.set_ylabel("y (map units)")
    ax.set_title(f"paths ({len(coverage.all_cells)} distinct {int(cell)}-unit cells)")
    ax2.plot(np.arange(1, len(coverage.per_episode) + 1), coverage.per_episode, ".-")
    ax2.set_xlabel("episode")
    ax2.set_ylabel("cells visited in the episode")
    ax2.set_ylim(bottom=0)
    ax2.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
