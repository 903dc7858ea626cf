"""``explorer explore`` on Gymnasium games through the command line: an ALE game and a MiniGrid maze
leave a run directory with coverage and its picture, a recorded session replays, and a mapping or a
module that cannot be had is one line and exit 1, leaving nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from explorer import cli

pytest.importorskip("gymnasium")

SMALL = ["--no-progress", "--set", "learner.schedule.warmup_steps=60", "--set", "learner.schedule.batch_size=8",
         "--set", "learner.networks.filters=[4]", "--set", "learner.networks.hidden=16", "--set", "learner.networks.feature=16",
         "--set", "learner.schedule.replay_mb=2", "--set", "run.log_every=50"]


def explore(out, *args: str) -> dict:
    assert cli.main(["explore", "--out", str(out), *SMALL, "--set", "game.name=gym", *args]) == 0
    (run,) = out.iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["run_dir"] == str(run)
    assert (run / "trajectory.png").stat().st_size > 1000 and (run / "config.toml").is_file()
    return summary


def test_montezuma_is_explored_by_the_learning_agent_in_rooms_of_16_pixel_cells(tmp_path, capsys):
    pytest.importorskip("ale_py")
    summary = explore(tmp_path / "runs", "--steps", "300", "--set", "game.id=ALE/MontezumaRevenge-v5")
    assert summary["steps"] == 300 and summary["updates"] > 0
    assert summary["cells"] == "map cells" and summary["distinct_cells"] >= 2
    assert "distinct cells" in capsys.readouterr().out


def test_a_minigrid_maze_is_explored_recorded_and_its_session_replays(tmp_path, capsys):
    pytest.importorskip("minigrid")
    summary = explore(tmp_path / "runs", "--steps", "300", "--agent", "sticky", "--record", str(tmp_path / "sessions"),
                      "--set", "game.id=MiniGrid-MultiRoom-N2-S4-v0", "--set", "game.episode_steps=100")
    assert summary["episodes"] >= 2 and summary["distinct_cells"] >= 2 and summary["cells"] == "map cells"
    (session,) = (tmp_path / "sessions").iterdir()
    assert summary["session"] == str(session)
    meta = json.loads((session / "meta.json").read_text())
    assert meta["meta"]["config"]["game"]["id"] == "MiniGrid-MultiRoom-N2-S4-v0"
    assert cli.main(["replay", str(session), "--out", str(tmp_path / "replayed"), *SMALL]) == 0
    (run,) = (tmp_path / "replayed").iterdir()
    replayed = json.loads((run / "summary.json").read_text())
    assert replayed["transitions"] > 250 and replayed["updates"] > 0


def test_a_game_without_positions_is_measured_in_frame_cells_and_says_so(tmp_path, capsys):
    pytest.importorskip("ale_py")
    summary = explore(tmp_path / "runs", "--steps", "120", "--agent", "random", "--set", "game.id=ALE/Pong-v5",
                      "--set", "game.episode_steps=50")
    assert summary["cells"].startswith("frame cells (Go-Explore's 11x8, 8 grey levels")
    lines = [json.loads(line) for line in (tmp_path / "runs").joinpath(Path(summary["run_dir"]).name, "metrics.jsonl")
             .read_text().splitlines()]
    episodes = [r for r in lines if "episode" in r]
    assert len(episodes) == 2 and all(r["cells_are"] == summary["cells"] for r in episodes)
    assert f"({summary['cells']})" in capsys.readouterr().out


@pytest.mark.parametrize(("sets", "line"), [
    (["game.id=CartPole-v1"], "explorer: the env's Discrete(2) actions have no meanings the pad knows; describe each "
     '(by index 0..1) as a pad state in game.actions, e.g. game.actions = {"0" = {}, "1" = {walk_y = 1}} (docs/gym.md)'),
    (["game.id=CartPole-v1", 'game.actions={"0" = {walk_x = -1}, "1" = {jump = 1}}'], "explorer: game.actions['1'] "
     "names jump, not an input of the pad (camera_x, camera_y, walk_x, walk_y, a): use those names, or add the "
     "button to pad.buttons"),
    (["game.id=Foo/Bar-v0", "game.module=no_such_module"], "explorer: game.module = no_such_module cannot be imported "
     "(No module named 'no_such_module'), so game.id = Foo/Bar-v0 is not registered: pip install -e '.[gym]' "
     "(ale-py, minigrid), or install the package that registers it"),
])
def test_a_bad_mapping_or_a_missing_module_is_one_line_and_leaves_nothing(tmp_path, capsys, sets, line):
    out = tmp_path / "runs"
    code = cli.main(["explore", "--steps", "100", "--out", str(out), *SMALL, "--set", "learner.schedule.warmup_steps=10",
                     "--set", "game.name=gym", *(a for s in sets for a in ("--set", s))])
    assert code == 1
    err = capsys.readouterr().err
    assert err == line + "\n"
    assert not out.exists() or list(out.iterdir()) == []


def test_a_reach_prior_trained_on_a_recorded_session_of_a_game_plays_that_game(tmp_path, load_tool, capsys):
    """Any game's own pixels make its reach prior: record a session, train a prior on it with
    ``tools/traversability.py --sessions``, and the planner scores by it (``learner.actions.reach_weights``)."""
    pytest.importorskip("minigrid")
    game = ["--set", "game.id=MiniGrid-MultiRoom-N2-S4-v0", "--set", "game.episode_steps=100"]
    explore(tmp_path / "recorded", "--steps", "200", "--agent", "sticky", "--record", str(tmp_path / "sessions"),
            *game)
    weights = tmp_path / "multiroom_pixels.npz"
    trav = load_tool("traversability")
    assert trav.main(["--sessions", str(tmp_path / "sessions"), "--labels", "pixels", "--ship", str(weights),
                      "--epochs", "1", "--out", str(tmp_path / "work")]) == 0
    planner = ["--set", "learner.actions.plan_candidates=4", "--set", "learner.actions.plan_score=reach",
               "--set", "learner.action_repeat=8", "--set", f"learner.actions.reach_weights={str(weights)!r}"]
    summary = explore(tmp_path / "runs", "--steps", "200", *game, *planner)
    assert summary["steps"] == 200 and summary["updates"] > 0
    (run,) = (tmp_path / "runs").iterdir()
    assert f"reach_weights = {str(weights)!r}".replace("'", '"') in (run / "config.toml").read_text()
    weights.unlink()  # a resumed run whose prior is gone says so at start, in one line
    capsys.readouterr()
    assert cli.main(["explore", "--resume", str(run), "--steps", "300", *SMALL]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "multiroom_pixels.npz cannot be read" in err and "reach_weights" in err
