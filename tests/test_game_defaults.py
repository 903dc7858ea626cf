"""The settings the built-in game brings (``GAME_DEFAULTS``): taken where nothing sets them, by the commands
that play that game only, and written into the run so that it goes on with them."""

import pytest
import tomllib

from explorer import cli
from explorer.config import GAME_DEFAULTS, ConfigError, load
from explorer.config.schema import REACH_SETTINGS
from explorer.run.resume import command_config

BROUGHT = GAME_DEFAULTS["vizdoom"]


def settings(config):
    return {key: config.setting(key) for key in BROUGHT}


def test_vizdoom_brings_the_reach_planner_and_a_tapped_a_and_the_schema_keeps_its_own_defaults():
    assert settings(load(None, [], game=True)) == {"learner.action_repeat": 8, "learner.actions.plan_candidates": 8,
                                                   "learner.actions.plan_score": "reach",
                                                   "learner.schedule.update_every": 2,
                                                   "learner.actions.press_share": 0.95, "pad.tap_gap": 3}
    assert settings(load(None, [])) == {"learner.action_repeat": 1, "learner.actions.plan_candidates": 0,
                                        "learner.actions.plan_score": "model", "learner.schedule.update_every": 1,
                                        "learner.actions.press_share": 0.5, "pad.tap_gap": 0}


def test_a_setting_given_wins_over_the_games_and_the_others_still_come(tmp_path):
    config = load(None, ["learner.action_repeat=2"], game=True)
    assert config.learner.action_repeat == 2 and config.learner.actions.plan_score == "reach"
    path = tmp_path / "mine.toml"
    path.write_text("[learner.actions]\nplan_candidates = 0\n")
    config = load(path, [], game=True)
    assert config.learner.actions.plan_candidates == 0 and config.learner.action_repeat == 8


@pytest.mark.parametrize("sets", [
    ["game.name=gym", "game.id=ALE/MontezumaRevenge-v5"],  # another game brings nothing
    ["game.name=synthetic"],
])
def test_other_games_keep_the_schemas_defaults(sets):
    assert settings(load(None, sets, game=True)) == settings(load(None, sets))


@pytest.mark.parametrize("sets", [["observation.grayscale=true"], ["observation.width=84", "observation.height=84"]])
def test_frames_the_reach_prior_cannot_read_keep_the_planner_off_and_still_tap_a(sets):
    """Frames the reach prior was not trained on: ViZDoom brings no planner, and still the pressed, tapped A
    its doors need."""
    brought, schema = settings(load(None, sets, game=True)), settings(load(None, sets))
    assert {key: brought[key] for key in REACH_SETTINGS} == {key: schema[key] for key in REACH_SETTINGS}
    assert brought["learner.actions.press_share"] == 0.95 and brought["pad.tap_gap"] == 3


def test_a_wrong_type_is_still_named_with_where_it_came_from():
    with pytest.raises(ConfigError, match=r"observation.height \(from --set\)"):
        load(None, ["observation.height=tall"], game=True)


def test_only_a_new_run_of_the_built_in_game_takes_them():
    assert command_config(None, None, [], "an explore run", game=True).learner.actions.plan_score == "reach"
    # explorer play without --game plays a live game, whatever game.name says
    assert command_config(None, None, [], "a play run").learner.actions.plan_candidates == 0


def test_an_explore_run_writes_what_it_ran_with_and_resumes_with_it(tmp_path):
    small = ["--no-progress", "--set", "game.episode_steps=40", "--set", "learner.schedule.warmup_steps=20",
             "--set", "learner.schedule.batch_size=4", "--set", "learner.networks.filters=[4]",
             "--set", "learner.networks.hidden=16", "--set", "learner.networks.feature=16",
             "--set", "learner.schedule.replay_mb=4", "--set", "observation.stack=1", "--set", "learner.n_step=1"]
    assert cli.main(["explore", "--steps", "60", "--out", str(tmp_path / "runs"), *small]) == 0
    (run,) = (tmp_path / "runs").iterdir()
    written = tomllib.loads((run / "config.toml").read_text())
    assert written["learner"]["action_repeat"] == 8 and written["learner"]["schedule"]["update_every"] == 2
    assert written["learner"]["actions"]["plan_candidates"] == 8 and written["learner"]["actions"]["plan_score"] == "reach"
    assert written["learner"]["actions"]["press_share"] == 0.95 and written["pad"]["tap_gap"] == 3
    # resumed, the run keeps them; a --set that changes one is refused as any other change of how it learns
    assert cli.main(["explore", "--resume", str(run), "--steps", "80", "--no-progress"]) == 0
    assert cli.main(["explore", "--resume", str(run), "--steps", "100", "--no-progress",
                     "--set", "learner.action_repeat=1"]) == 2
