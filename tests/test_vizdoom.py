"""The built-in game: real ViZDoom frames, the pad bridge, and `explorer explore` end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from explorer import cli
from explorer.config import load
from explorer.envs import make_game
from explorer.envs.doom.game import DoomPad, GameError

pytest.importorskip("vizdoom")


@pytest.fixture
def game():
    g = make_game(load())
    yield g
    g.close()


def test_frames_have_the_observation_shape_and_show_the_game(game):
    frame = game.grab()
    assert frame.shape == (64, 64, 3) and frame.dtype == np.uint8  # colour by default
    assert frame.std() > 5  # a rendered view, not a blank buffer
    grey = make_game(load(None, ["observation.grayscale=true", "observation.width=80"]))
    try:
        assert grey.grab().shape == (64, 80, 1)
    finally:
        grey.close()


def test_walk_stick_moves_the_player_and_camera_stick_turns(game):
    pad = DoomPad(game)
    start = game.position()
    pad.send(np.array([0, 0, 0, 1.0]))  # walk forward
    frames = []
    for _ in range(12):
        game.advance()
        frames.append(game.grab())
    moved = game.position()
    dx, dy = moved.x - start.x, moved.y - start.y
    assert np.hypot(dx, dy) > 10
    facing = np.deg2rad(start.angle)
    assert dx * np.cos(facing) + dy * np.sin(facing) > 0.3 * np.hypot(dx, dy)  # forward (it may slide along a wall)
    assert moved.angle == pytest.approx(start.angle, abs=1e-3)
    assert any(np.abs(f.astype(int) - frames[0].astype(int)).mean() > 1 for f in frames[1:])
    pad.send(np.array([1.0, 0, 0, 0]))  # turn right at full camera x
    game.advance()
    turned = game.position()
    # ViZDoom's angle grows to the left: turning right lowers it, by turn_scale per tic.
    assert (moved.angle - turned.angle) % 360 == pytest.approx(game.config.turn_scale * game.config.frame_skip, abs=1)
    pad.neutral()
    assert np.all(game.action == 0)


def test_episodes_end_after_episode_steps():
    g = make_game(load(None, ["game.episode_steps=20"]))
    try:
        for _ in range(19):
            g.advance()
            assert not g.episode_ended
        g.advance()
        assert g.episode_ended
        g.new_episode()
        assert not g.episode_ended and g.episode_step == 0
    finally:
        g.close()


def test_unknown_scenario_lists_the_bundled_ones():
    with pytest.raises(GameError, match="my_way_home"):
        make_game(load(None, ["game.scenario=nowhere"]))


def test_explore_writes_a_run_directory_with_a_readable_picture(tmp_path):
    rc = cli.main(["explore", "--steps", "160", "--out", str(tmp_path), "--no-progress",
                   "--set", "game.episode_steps=60", "--set", "learner.networks.filters=[8, 8]", "--set", "learner.networks.hidden=32", "--set", "learner.networks.feature=32"])
    assert rc == 0
    (run,) = list(tmp_path.iterdir())
    assert load(run / "config.toml").game.episode_steps == 60  # the merged config
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 160 and summary["episodes"] == 2
    assert len(summary["cells_per_episode"]) == 2 and all(c >= 1 for c in summary["cells_per_episode"])
    with Image.open(run / "trajectory.png") as im:
        assert im.size[0] > 400 and im.size[1] > 300
        assert np.asarray(im.convert("L")).std() > 10  # something is drawn
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["episode"] for x in lines if "episode" in x] == [1, 2]


def test_sticky_random_moves_further_than_standing_still(tmp_path):
    from explorer.run.explore import explore

    summary = explore(load(None, ["run.agent=sticky", "run.steps=300", f"run.dir={str(tmp_path)!r}"]), progress=False)
    assert summary["distinct_cells"] >= 3
