"""The coverage pictures draw what they say: every episode's cells inside the episode panel's range."""

from __future__ import annotations

import pytest

from explorer.run import plots
from explorer.run.coverage import Coverage


def _two_episodes() -> Coverage:
    cov = Coverage(64.0)
    for episode_cells in (30, 12):
        for i in range(episode_cells):
            cov.add(64.0 * i + 1.0, 1.0)
        cov.end_episode()
    return cov


@pytest.mark.parametrize("draw", [lambda cov, path: plots.plot_trajectory(cov, path),
                                  lambda cov, path: plots.plot_workers([cov, _two_episodes()], path)],
                         ids=["one run", "workers"])
def test_the_episode_panel_shows_every_episodes_cells(tmp_path, monkeypatch, draw):
    figures = []
    save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, *a, **k: (figures.append(fig), save(fig, *a, **k))[1])
    cov = _two_episodes()
    assert cov.per_episode == [30, 12]
    assert draw(cov, tmp_path / "coverage.png").stat().st_size > 1000
    episodes = figures[0].axes[1]
    low, high = episodes.get_ylim()
    assert low == 0 and high >= 30  # the plotted points lie inside the panel, not above it
    assert [list(line.get_ydata()) for line in episodes.get_lines()][0] == [30, 12]
