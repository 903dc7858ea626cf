"""The learner's settings in groups (``learner.networks``, ``.actions``, ``.schedule``, ``.live``), and the keys
of the flat layout before them, which still load: from a file or ``--set`` with one line on stderr per key, from
a run directory's own ``config.toml`` without a word, never both at once."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomli_w

from explorer import cli
from explorer.config import MOVED_KEYS, Config, ConfigError, load, loader, missing_keys

#: the learner's settings as the flat layout named them (explorer before the groups): each still loads
FLAT = ("batch_size", "update_every", "warmup_steps", "replay_mb", "checkpoint_every", "overlap", "publish_every",
        "lag_steps", "between_ticks", "max_updates_per_s", "hidden", "feature", "filters", "augment",
        "shared_encoder", "context", "view_strips", "oracle_map", "action_prior", "action_low", "action_high",
        "noise_rho", "random_options", "option_steps", "residual", "plan_candidates", "plan_score", "model_weight")
#: the learner's settings that stayed where they were
STAYED = ("algo", "gamma", "n_step", "action_repeat", "actor_lr", "critic_lr", "alpha_lr", "init_alpha",
          "target_entropy", "tau", "clip_norm", "td3_noise", "td3_target_noise", "td3_policy_delay", "preact_penalty",
          "seed", "eager", "xla")


@pytest.fixture(autouse=True)
def untold(monkeypatch):
    """Each test starts with no old key told yet (the loader tells each once per process)."""
    monkeypatch.setattr(loader, "_told", set())


def _told(err: str) -> list[str]:
    return [line for line in err.splitlines() if " is now " in line]


#: settings added after the learner's settings were grouped, with the values the older code ran with
AFTER_GROUPS = {"learner.actions.plan_from_policy": 0, "learner.actions.replan_below": 0.0,
                "learner.actions.plan_memory": 0.0, "learner.actions.press_share": 0.5,
                "learner.actions.return_share": 0.0, "learner.networks.echo_units": 0,
                "learner.networks.recurrent_units": 0, "learner.networks.recurrent_window": 16,
                "learner.actions.reach_weights": "", "learner.actions.plan_route": 0,
                "learner.actions.route_after": 0}


def flat_layout(config: Config) -> dict:
    """``config`` as the flat layout wrote it into a run's ``config.toml``: the learner's settings in ``[learner]``."""
    tree = config.to_dict()
    learner = tree["learner"]
    for group in ("networks", "actions", "schedule", "live"):
        learner.update(learner.pop(group))
    for key in AFTER_GROUPS:  # settings added after the groups: the flat layout never wrote them
        learner.pop(key.rsplit(".", 1)[1])
    assert set(learner) | {"seed"} == {*FLAT, *STAYED}  # a seed derived from run.seed is not written
    return tree


def _run_dir(tmp_path: Path, tree: dict, name: str = "old-run") -> Path:
    run = tmp_path / name
    run.mkdir()
    (run / "config.toml").write_text(tomli_w.dumps(tree), encoding="utf-8")
    return run


# ---------------------------------------------------------------- the groups and the table of old keys

def test_the_groups_hold_every_setting_once_and_the_table_names_each_moved_one():
    defaults = Config().learner
    grouped = {f"learner.{g}.{k}" for g in ("networks", "actions", "schedule", "live")
               for k in type(getattr(defaults, g)).model_fields}
    assert set(MOVED_KEYS) == {f"learner.{k}" for k in FLAT}
    assert set(MOVED_KEYS.values()) == grouped - set(AFTER_GROUPS)  # a setting added since was never flat
    assert all(new.rsplit(".", 1)[1] == old.rsplit(".", 1)[1] for old, new in MOVED_KEYS.items())
    assert set(type(defaults).model_fields) == {*STAYED, "networks", "actions", "schedule", "live"}


def test_the_new_keys_load_from_a_file_and_from_set(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text("[learner.schedule]\nwarmup_steps = 400\n[learner.networks]\nhidden = 64\n"
                    "[learner.actions]\nnoise_rho = 0.5\n[learner.live]\nbetween_ticks = false\n")
    config = load(path, ["learner.schedule.batch_size=16", "learner.gamma=0.9"])
    learner = config.learner
    assert (learner.schedule.warmup_steps, learner.networks.hidden, learner.actions.noise_rho) == (400, 64, 0.5)
    assert (learner.live.between_ticks, learner.schedule.batch_size, learner.gamma) == (False, 16, 0.9)
    assert capsys.readouterr().err == ""
    # a table given to a group on the command line sets what it holds, and only that
    tabled = load(None, ["learner.schedule={warmup_steps = 5, lag_steps = 7}"], base=config).learner.schedule
    assert (tabled.warmup_steps, tabled.lag_steps, tabled.batch_size) == (5, 7, 16)


def test_config_toml_has_a_table_per_group_after_the_learners_own_keys():
    text = loader.render_toml()
    tables = [line for line in text.splitlines() if line.startswith("[")]
    at = tables.index("[learner]")
    assert tables[at:at + 5] == ["[learner]", "[learner.networks]", "[learner.actions]", "[learner.schedule]",
                                 "[learner.live]"]


# ---------------------------------------------------------------- old keys a user gives

def test_an_old_key_in_a_config_file_loads_as_its_new_one_and_says_so_once(tmp_path, capsys):
    path = tmp_path / "mine.toml"
    path.write_text("[learner]\nwarmup_steps = 400\nhidden = 64\ngamma = 0.9\n")
    config = load(path)
    assert (config.learner.schedule.warmup_steps, config.learner.networks.hidden, config.learner.gamma) == (400, 64, 0.9)
    assert _told(capsys.readouterr().err) == [
        "explorer: learner.warmup_steps is now learner.schedule.warmup_steps (the old key still works)",
        "explorer: learner.hidden is now learner.networks.hidden (the old key still works)"]
    load(path)
    load(None, ["learner.warmup_steps=300"])
    assert capsys.readouterr().err == ""  # once per key


def test_an_old_key_in_set_loads_on_the_command_line_once(tmp_path, capsys):
    config = load(None, ["learner.warmup_steps=400", "learner.max_updates_per_s=2.5"])
    assert config.learner.schedule.warmup_steps == 400 and config.learner.live.max_updates_per_s == 2.5
    err = capsys.readouterr().err
    assert _told(err) == err.splitlines() == [
        "explorer: learner.warmup_steps is now learner.schedule.warmup_steps (the old key still works)",
        "explorer: learner.max_updates_per_s is now learner.live.max_updates_per_s (the old key still works)"]
    # the same key from the file and the command line is told once, the command line winning
    path = tmp_path / "mine.toml"
    path.write_text("[learner]\nbatch_size = 8\n")
    assert load(path, ["learner.batch_size=16"]).learner.schedule.batch_size == 16
    assert len(_told(capsys.readouterr().err)) == 1


def test_an_old_key_in_an_error_is_named_with_its_new_key_and_origin(tmp_path, capsys):
    path = tmp_path / "mine.toml"
    path.write_text("[learner]\nbatch_size = 0\n")
    with pytest.raises(ConfigError, match=rf"^invalid configuration: learner.schedule.batch_size \(from {path}\): "
                                          r"Input should be greater than 0, got 0$"):
        load(path)
    with pytest.raises(ConfigError, match=r"learner.networks.filters.1 \(from --set\): Input should be greater than 0"):
        load(None, ["learner.filters=[8, 0]"])


@pytest.mark.parametrize("given", [
    (["learner.warmup_steps=1", "learner.schedule.warmup_steps=2"], "--set"),
    (["learner.schedule.warmup_steps=2", "learner.warmup_steps=1"], "--set"),
    (["learner.warmup_steps=1", "learner.schedule={warmup_steps = 2}"], "--set"),
    (["learner.filters=[8]", "learner.networks.filters=[4]"], "--set"),
    ("[learner]\nwarmup_steps = 1\n[learner.schedule]\nwarmup_steps = 2\n", "file"),
], ids=["set-old-first", "set-new-first", "set-table", "set-list", "file"])
def test_a_setting_given_under_its_old_and_its_new_key_is_one_line_naming_both(given, tmp_path, capsys):
    sets, where = given
    path = None
    if where == "file":
        path = tmp_path / "both.toml"
        path.write_text(sets)
        sets = []
    old, new = ("learner.filters", "learner.networks.filters") if "filters" in str(sets) else \
        ("learner.warmup_steps", "learner.schedule.warmup_steps")
    with pytest.raises(ConfigError) as err:
        load(path, sets)
    text = str(err.value)
    assert "\n" not in text and old in text and new in text and f"keep {new} only" in text, text
    assert f"(from {path if path else '--set'})" in text
    assert capsys.readouterr().err == ""  # no "is now" line beside the error


def test_both_keys_on_the_command_line_exit_with_one_line(capsys):
    assert cli.main(["explore", "--steps", "10", "--no-progress", "--set", "learner.warmup_steps=1",
                     "--set", "learner.schedule.warmup_steps=2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "learner.warmup_steps and learner.schedule.warmup_steps" in err, err


def test_an_old_key_in_a_file_and_its_new_key_on_the_command_line_is_an_override(tmp_path, capsys):
    path = tmp_path / "mine.toml"
    path.write_text("[learner]\nwarmup_steps = 1\n")
    assert load(path, ["learner.schedule.warmup_steps=2"]).learner.schedule.warmup_steps == 2


# ---------------------------------------------------------------- each group's checks, and those across groups

@pytest.mark.parametrize("sets, says", [
    (["learner.networks.oracle_map=4"], r"learner.networks.oracle_map = 4 needs an odd number of squares"),
    (["learner.networks.oracle_map=5", "learner.networks.context=false"],
     r"learner.networks.oracle_map = 5 needs .* learner.networks.context = true"),
    (["learner.networks.view_strips=4", "learner.networks.context=false"],
     r"learner.networks.view_strips = 4 feeds the strips through the context, but learner.networks.context = false"),
    (["learner.actions.action_prior=[0.0, 0.0, 0.0, 0.5]"],
     r"learner.actions.action_prior.3 \(walk y\) = 0.5 must lie strictly between learner.actions.action_low.3"),
    (["learner.actions.action_low=[0.6, -1.0, -1.0, 0.6]"],
     r"learner.actions.action_low.0 \(camera x\) = 0.6 must be below learner.actions.action_high.0 = 0.5"),
    (["learner.actions.residual=0.5", "learner.actions.random_options=0.1"],
     r"learner.actions.residual = 0.5 .* needs learner.actions.plan_candidates = 0 and "
     r"learner.actions.random_options = 0"),
    (["learner.actions.plan_candidates=4", "learner.networks.shared_encoder=false"],
     r"learner.actions.plan_candidates = 4 predicts from the critic's encoder, which the actor reads only with "
     r"learner.networks.shared_encoder = true"),
    (["learner.actions.residual=0.5", "learner.networks.context=false"],
     r"learner.actions.residual = 0.5 reads its proposal from the context: it needs learner.networks.context = "
     r"true"),
], ids=["oracle-even", "oracle-context", "strips-context", "prior-outside", "low-above-high", "residual-options",
        "planner-encoder", "residual-context"])
def test_each_groups_checks_name_the_new_keys_and_where_they_came_from(sets, says):
    with pytest.raises(ConfigError, match=says) as err:
        load(None, sets)
    text = str(err.value)
    assert "\n" not in text and text.rsplit(" (", 1)[1].startswith("from --set"), text  # where they came from


def test_an_old_key_in_a_check_across_groups_is_named_by_its_new_key(capsys):
    with pytest.raises(ConfigError, match=r"learner.actions.plan_candidates = 4 .* learner.networks.shared_encoder "
                                          r"= true: .*\(from --set\)$"):
        load(None, ["learner.plan_candidates=4", "learner.shared_encoder=false"])


def test_an_unknown_key_in_a_group_lists_the_groups_keys():
    with pytest.raises(ConfigError, match=r"unknown key 'learner.schedule.warmup' \(from --set\); known keys here: "
                                          r"batch_size, checkpoint_every, lag_steps, overlap, publish_every, "
                                          r"replay_mb, update_every, warmup_steps$"):
        load(None, ["learner.schedule.warmup=3"])
    with pytest.raises(ConfigError, match=r"^invalid configuration: unknown key 'learner.networks.warmup_steps' "
                                          r"\(from --set\); known keys here: .*; warmup_steps is "
                                          r"learner.schedule.warmup_steps$"):
        load(None, ["learner.networks.warmup_steps=3"])  # a group's setting under another group says where it is


# ---------------------------------------------------------------- a run directory written in the flat layout

def test_a_run_directory_in_the_flat_layout_resumes_and_evaluates_with_its_settings_silently(tmp_path, capsys):
    from explorer.run.resume import evaluation_config, resumed_config, run_settings

    trained = load(None, ["learner.schedule.warmup_steps=123", "learner.networks.hidden=48",
                          "learner.actions.action_high=[0.5, 0.9, 1.0, 1.0]", "learner.live.max_updates_per_s=3.0"])
    run = _run_dir(tmp_path, flat_layout(trained))
    capsys.readouterr()
    assert run_settings(run) == trained
    # its old keys set their settings; only settings added since are missing, at the values it ran with, which
    # are today's defaults too: nothing to tell
    assert missing_keys(run / "config.toml") == AFTER_GROUPS and missing_keys(run / "config.toml", True) == {}
    assert resumed_config(run, None, ["run.steps=99"], "an explore run").learner == trained.learner
    assert evaluation_config(run / "checkpoints" / "learner-5", None, []).learner == trained.learner
    assert capsys.readouterr().err == ""
    # the command line's old keys are told as ever
    resumed = resumed_config(run, None, ["learner.warmup_steps=200"], "an explore run")
    assert resumed.learner.schedule.warmup_steps == 200
    assert _told(capsys.readouterr().err) == [
        "explorer: learner.warmup_steps is now learner.schedule.warmup_steps (the old key still works)"]


@pytest.mark.parametrize("change", ["learner.actions.action_high=[0.5, 1.0, 1.0, 1.0]",
                                    "learner.action_high=[0.5, 1.0, 1.0, 1.0]"], ids=["new-key", "old-key"])
def test_a_flat_layout_runs_policy_settings_are_compared_under_their_new_keys(change, tmp_path, capsys):
    from explorer.run.resume import resumed_config

    trained = load(None, ["learner.actions.action_high=[0.5, 0.9, 1.0, 1.0]"])
    run = _run_dir(tmp_path, flat_layout(trained))
    with pytest.raises(ConfigError) as err:
        resumed_config(run, None, [change], "an explore run")
    assert "\n" not in str(err.value)
    assert "learner.actions.action_high = [0.5, 1.0, 1.0, 1.0] (the run's: [0.5, 0.9, 1.0, 1.0])" in str(err.value)


def test_a_flat_layout_runs_network_settings_explain_a_checkpoint_that_does_not_fit(tmp_path):
    from explorer.run.builder import settings_differences

    run = _run_dir(tmp_path, flat_layout(load(None, ["learner.networks.hidden=48"])))
    said = settings_differences(run / "config.toml", Config())
    assert said is not None and "learner.networks.hidden = 48 (the settings in use have 256)" in said
    assert "--set 'learner.networks.hidden=48'" in said
    assert settings_differences(run / "config.toml", load(None, ["learner.networks.hidden=48"])) is None


def test_a_flat_layout_runs_file_still_chooses_no_place_outside_the_run(tmp_path, capsys):
    from explorer.run.resume import resumed_config

    tree = flat_layout(load(None, ["learner.schedule.warmup_steps=123"]))
    tree["record"]["dir"], tree["control"]["stop_key"] = str(tmp_path / "elsewhere"), "q"
    run = _run_dir(tmp_path, tree)
    config = resumed_config(run, None, [], "an explore run")
    assert config.record.dir == "" and config.control.stop_key == "f12"  # the defaults, not the file's
    assert config.learner.schedule.warmup_steps == 123  # what it may choose, it chooses under its old keys
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all("which a run's own file does not choose" in line for line in err), err


def test_every_setting_the_resume_the_checkpoints_and_the_trust_rules_name_exists():
    from explorer.run.builder import SHAPING_SETTINGS
    from explorer.run.resume import POLICY_SETTINGS
    from explorer.run.trust import PLACES

    known = set(loader._settings())
    for key in (*POLICY_SETTINGS, *SHAPING_SETTINGS, *PLACES):
        assert key in known, key


SMALL = ["--set", "game.episode_steps=50", "--set", "learner.schedule.warmup_steps=20", "--set",
         "learner.schedule.batch_size=8", "--set", "learner.networks.filters=[4]", "--set", "learner.networks.hidden=16",
         "--set", "learner.networks.feature=16", "--set", "learner.schedule.replay_mb=4", "--set", "observation.stack=1"]


def test_explore_resumes_a_run_whose_config_toml_has_the_flat_layout(tmp_path, capsys):
    # the settings added after the groups at the values a flat-layout run ran with (the game brings others)
    then = [arg for key, value in AFTER_GROUPS.items() for arg in ("--set", f"{key}={value}")]
    assert cli.main(["explore", "--steps", "40", "--out", str(tmp_path / "runs"), "--no-progress", *SMALL,
                     *then]) == 0
    (run,) = list((tmp_path / "runs").iterdir())
    written = load(run / "config.toml")
    (run / "config.toml").write_text(tomli_w.dumps(flat_layout(written)), encoding="utf-8")
    capsys.readouterr()
    assert cli.main(["explore", "--resume", str(run), "--steps", "60", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert not _told(err) and "predates" not in err, err
    assert load(run / "config.toml").learner == written.learner  # the run goes on with the settings it had


def test_a_run_file_older_than_a_setting_runs_as_the_code_that_wrote_it(tmp_path, monkeypatch):
    # a setting whose older behaviour is not its default: a run written before it existed keeps that behaviour
    monkeypatch.setitem(loader.ADDED_SETTINGS, "novelty.heading_window", 12.0)
    run = tmp_path / "config.toml"
    run.write_text(loader.render_toml(load(None, ["novelty.heading_window=45"])))
    older = tmp_path / "older.toml"
    older.write_text("\n".join(line for line in run.read_text().splitlines()
                               if not line.startswith(("heading_window", "turn_rate"))) + "\n")
    assert load(older, [], run_file=True).novelty.heading_window == 12.0
    assert missing_keys(older)["novelty.heading_window"] == 12.0  # what resume's "predates" line says it takes
    assert load(older, [], run_file=True).novelty.turn_rate == loader.ADDED_SETTINGS["novelty.turn_rate"]
    assert load(older).novelty.heading_window == Config().novelty.heading_window  # a user's file: today's default
    assert load(run, [], run_file=True).novelty.heading_window == 45.0  # a run that wrote the key keeps its value
