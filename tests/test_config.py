from pathlib import Path

import pytest
from pydantic import ValidationError

from explorer import config as cfg

ROOT = Path(__file__).resolve().parent.parent


def test_config_toml_holds_every_default_with_a_comment():
    text = (ROOT / "config.toml").read_text()
    assert cfg.load(ROOT / "config.toml") == cfg.Config()
    assert text == cfg.render_toml(), "config.toml is stale: run python tools/write_config.py"
    for line in text.splitlines():
        if "=" in line and not line.startswith("#"):
            assert "# " in line, f"no comment on {line!r}"


def test_file_and_overrides_merge_in_order(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[capture]\nfps = 20\nwidth = 128\n[run]\nagent = 'sticky'\n")
    c = cfg.load(path, ["capture.fps=30", "run.seed=7", "game.scenario=basic"])
    assert c.capture.fps == 30.0
    assert c.capture.width == 128
    assert c.run.agent == "sticky"
    assert c.run.seed == 7
    assert c.game.scenario == "basic"  # a bare word is a string
    assert c.capture.height == 256  # untouched default


def test_config_is_frozen():
    c = cfg.Config()
    with pytest.raises(ValidationError):
        c.capture.fps = 3  # type: ignore[misc]


def test_unknown_key_names_key_file_and_known_keys(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[capture]\nfsp = 20\n")
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load(path)
    msg = str(err.value)
    assert "capture.fsp" in msg and str(path) in msg and "fps" in msg


def test_unknown_section_is_an_error():
    with pytest.raises(cfg.ConfigError, match="'captur'"):
        cfg.load(None, ["captur.fps=3"])


def test_wrong_type_names_key_and_origin(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[control]\nhz = 'fast'\n")
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load(path)
    assert "control.hz" in str(err.value) and str(path) in str(err.value) and "'fast'" in str(err.value)
    with pytest.raises(cfg.ConfigError, match=r"capture.fps \(from --set\)"):
        cfg.load(None, ["capture.fps=-1"])
    with pytest.raises(cfg.ConfigError, match="run.agent"):
        cfg.load(None, ["run.agent=clever"])
    with pytest.raises(cfg.ConfigError, match=r"learner.action_prior.3 \(from --set\): Input should be less than 1"):
        cfg.load(None, ["learner.action_prior=[0, 0, 0, 1]"])
    with pytest.raises(cfg.ConfigError, match="learner.action_prior"):
        cfg.load(None, ["learner.action_prior=[0, 0.5]"])
    with pytest.raises(cfg.ConfigError, match=r"learner.action_prior.3 \(walk y\) = 0.8 must lie strictly between "
                       r"learner.action_low.3 = 0.9 and learner.action_high.3 = 1.0; .*\(from --set\)"):
        cfg.load(None, ["learner.action_low=[-1, -1, -1, 0.9]"])
    with pytest.raises(cfg.ConfigError, match=r"learner.action_low.0 \(camera x\) = 0.5 must be below learner.action_high.0 = 0.5"):
        cfg.load(None, ["learner.action_low=[0.5, -1, -1, -1]", "learner.action_high=[0.5, 1, 1, 1]"])
    with pytest.raises(cfg.ConfigError, match=r"learner.action_high.2 \(from --set\): Input should be less than or equal to 1"):
        cfg.load(None, ["learner.action_high=[1, 1, 2, 1]"])


def test_malformed_inputs_are_clear(tmp_path):
    with pytest.raises(cfg.ConfigError, match="does not exist"):
        cfg.load(tmp_path / "missing.toml")
    bad = tmp_path / "broken.toml"
    bad.write_text("[capture\nfps = 3")
    with pytest.raises(cfg.ConfigError, match="not valid TOML"):
        cfg.load(bad)
    with pytest.raises(cfg.ConfigError, match="section.key=value"):
        cfg.load(None, ["capture.fps"])


def test_dump_round_trips(tmp_path):
    c = cfg.load(None, ["learner.filters=[8, 8]", "capture.window_title='My \"Game\"'"])
    cfg.dump(c, tmp_path / "out.toml")
    assert cfg.load(tmp_path / "out.toml") == c
    assert c.learner.filters == (8, 8)
