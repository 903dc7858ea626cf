"""tools/learning_curve.py: the run's own figure at points of the run, from its episode lines."""
from __future__ import annotations

import json

import pytest

from explorer.config import Config, dump


@pytest.fixture(scope="module")
def lc(load_tool):
    return load_tool("learning_curve")


def test_each_point_counts_the_episodes_ended_by_it_with_deaths_as_whole_episodes(lc, tmp_path):
    dump(Config().replace(**{"game.episode_steps": 100}), tmp_path / "config.toml")
    lines = [{"step": 50, "loss": 1.0},  # a metric line, not an episode
             {"step": 100, "episode": 1, "cells": 10, "outcome": "timeout"},
             {"step": 150, "episode": 2, "cells": 20, "outcome": "death"},  # 50 steps, counted as 100
             {"step": 250, "episode": 3, "cells": 40, "outcome": "timeout"},
             {"step": 300, "episode": 4, "cells": 30, "outcome": "goal"}]  # 50 steps, counted as 50
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    c = lc.curve(tmp_path, [120, 260, 1000])
    assert c["points"][120] == {"episodes": 1, "figure": 10.0}
    assert c["points"][260]["episodes"] == 3 and c["points"][260]["figure"] == pytest.approx(70 / 300 * 100)
    assert c["points"][1000]["figure"] == pytest.approx(100 / 350 * 100)
    assert c["first_ten"] == c["last_ten"] == 25.0


def test_a_folder_without_metrics_is_one_line(lc, tmp_path):
    with pytest.raises(SystemExit, match="metrics.jsonl does not exist"):
        lc.curve(tmp_path, [10])
