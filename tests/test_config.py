from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from explorer import config as cfg
from explorer.agent.replay import replay_capacity
from explorer.config import ConfigError, load

ROOT = Path(__file__).resolve().parent.parent


def _fields(model, prefix=""):
    """(dotted key, field) of every setting and group of ``model``, the groups' settings included."""
    for key, field in model.model_fields.items():
        yield f"{prefix}{key}", field
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            yield from _fields(field.annotation, f"{prefix}{key}.")


def test_every_description_is_one_short_line_and_its_doc_link_resolves():
    import re

    root = Path(__file__).resolve().parent.parent
    for key, sub in _fields(cfg.Config):
        if "." not in key:
            continue  # a section
        text = sub.description or ""
        assert text and "\n" not in text and len(text) <= 110, f"{key}: {len(text)} characters"
        for doc, anchor in re.findall(r"\((docs/[\w.]+\.md)(?:#([\w-]+))?\)", text):
            lines = (root / doc).read_text(encoding="utf-8").splitlines()
            # a heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens
            anchors = {re.sub(r"[^\w\- ]", "", line[3:].strip().lower()).replace(" ", "-")
                       for line in lines if line.startswith("## ")}
            assert not anchor or anchor in anchors, f"{key}: {doc}#{anchor} has no such heading"


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
    with pytest.raises(cfg.ConfigError, match=r"learner.actions.action_prior.3 \(from --set\): Input should be less than 1"):
        cfg.load(None, ["learner.actions.action_prior=[0, 0, 0, 1]"])
    with pytest.raises(cfg.ConfigError, match="learner.actions.action_prior"):
        cfg.load(None, ["learner.actions.action_prior=[0, 0.5]"])
    with pytest.raises(cfg.ConfigError, match=r"learner.actions.action_prior.3 \(walk y\) = 0.8 must lie strictly between "
                       r"learner.actions.action_low.3 = 0.9 and learner.actions.action_high.3 = 1.0; .*\(from --set: "
                       r"learner.actions.action_low; defaults: learner.actions.action_prior, learner.actions.action_high\)"):
        cfg.load(None, ["learner.actions.action_low=[-1, -1, -1, 0.9]"])
    with pytest.raises(cfg.ConfigError, match=r"learner.actions.action_low.0 \(camera x\) = 0.5 must be below learner.actions.action_high.0 = 0.5"):
        cfg.load(None, ["learner.actions.action_low=[0.5, -1, -1, -1]", "learner.actions.action_high=[0.5, 1, 1, 1]"])
    with pytest.raises(cfg.ConfigError, match=r"learner.actions.action_high.2 \(from --set\): Input should be less than or equal to 1"):
        cfg.load(None, ["learner.actions.action_high=[1, 1, 2, 1]"])


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
    c = cfg.load(None, ["learner.networks.filters=[8, 8]", "capture.window_title='My \"Game\"'"])
    cfg.dump(c, tmp_path / "out.toml")
    assert cfg.load(tmp_path / "out.toml") == c
    assert c.learner.networks.filters == (8, 8)


def test_a_setting_of_the_wrong_kind_is_refused_not_converted(tmp_path):
    with pytest.raises(cfg.ConfigError, match=r"^invalid configuration: run.steps \(from --set\): takes a number, "
                       r"got true$"):
        cfg.load(None, ["run.steps=true"])  # pydantic would make it 1 step
    path = tmp_path / "c.toml"
    path.write_text("[game]\nvisible = 1\n[learner.networks]\nfilters = [true, 8]\n")
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load(path)
    assert str(err.value) == (f"invalid configuration:\n  game.visible (from {path}): takes true or false, got 1\n"
                              f"  learner.networks.filters (from {path}): takes numbers, got [True, 8]")
    with pytest.raises(cfg.ConfigError, match=r"learner.networks.filters.1 \(from --set\): Input should be greater than 0"):
        cfg.load(None, ["learner.networks.filters=[8, 0]"])  # a convolution of no filters
    assert cfg.load(None, ["run.seed=1.0", "game.visible=true"]).run.seed == 1  # a whole number is a number


def test_part_seeds_follow_run_seed_unless_set(tmp_path):
    # the default run keeps the seeds its parts always had
    assert cfg.Config().seeds() == {"run.seed": 0, "game.seed": 0, "learner.seed": 0, "novelty.seed": 1}
    assert cfg.load(None, ["run.seed=5"]).seeds() == {"run.seed": 5, "game.seed": 5, "learner.seed": 5,
                                                      "novelty.seed": 6}
    pinned = cfg.load(None, ["run.seed=5", "learner.seed=0"])
    assert pinned.seeds() == {"run.seed": 5, "game.seed": 5, "learner.seed": 0, "novelty.seed": 6}
    # a run's written config keeps what was set and leaves the derived seeds to run.seed
    cfg.dump(pinned, tmp_path / "run.toml")
    text = (tmp_path / "run.toml").read_text()
    assert text.count("seed = ") == 2 and "[learner]" in text.split("seed = 0")[0]
    assert cfg.load(tmp_path / "run.toml") == pinned
    assert cfg.load(tmp_path / "run.toml", ["run.seed=7"]).seeds() == {"run.seed": 7, "game.seed": 7,
                                                                     "learner.seed": 0, "novelty.seed": 8}
    assert pinned.replace(**{"run.seed": 2}).seeds()["game.seed"] == 2
    # a file that sets a part's seed pins it, even to the value it would be derived to
    (tmp_path / "set.toml").write_text("[novelty]\nseed = 1\n")
    assert cfg.load(tmp_path / "set.toml", ["run.seed=3"]).seeds()["novelty.seed"] == 1
    with pytest.raises(cfg.ConfigError, match=r"^invalid configuration: run.seed \(from --set\): Input should be "
                       r"greater than or equal to 0, got -1$"):
        cfg.load(None, ["run.seed=-1"])
    with pytest.raises(cfg.ConfigError, match=r"game.seed \(from --set\): Input should be less than or equal to 4294967295"):
        cfg.load(None, [f"game.seed={2**32}"])


# ---------------------------------------------------------------- the file itself

def test_a_config_file_that_is_not_utf8_names_the_file_and_the_byte(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes("[game]\nscenario = 'caf\u00e9'\n".encode("latin-1"))
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load(path)
    assert str(err.value) == (f"config file {path} is not UTF-8 text (byte 0xe9 on line 2); save it as UTF-8 "
                              f"or pass --config with the path of a TOML file")
    utf16 = tmp_path / "utf16.toml"
    utf16.write_text("[run]\nseed = 3\n", encoding="utf-16")  # what PowerShell's > writes
    with pytest.raises(cfg.ConfigError, match=r"utf16.toml is UTF-16 text .*save it as UTF-8$"):
        cfg.load(utf16)


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf[run]\nseed = 3\n")  # Notepad's UTF-8
    assert cfg.load(path).run.seed == 3


def test_a_folder_given_as_config_file_says_so_and_points_at_its_config_toml(tmp_path):
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load(tmp_path)
    assert str(err.value) == f"config file {tmp_path} is a folder, not a file; pass --config with the path of a TOML file"
    (tmp_path / "config.toml").write_text("[run]\nseed = 4\n")
    with pytest.raises(cfg.ConfigError, match=f"is a folder, not a file; .*, such as {tmp_path / 'config.toml'}$"):
        cfg.load(tmp_path)


def test_an_unreadable_config_file_says_what_to_do(tmp_path, monkeypatch):
    import errno

    path = tmp_path / "secret.toml"
    path.write_text("[run]\nseed = 4\n")

    def denied(self):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load(path)
    assert str(err.value) == (f"config file {path} cannot be read: permission denied; make it readable "
                              f"(chmod u+r {path}) or pass --config with the path of a TOML file")
    monkeypatch.setattr(Path, "read_bytes", lambda self: (_ for _ in ()).throw(OSError(errno.EIO, "Input/output error")))
    with pytest.raises(cfg.ConfigError, match=r"cannot be read: Input/output error; pass --config"):
        cfg.load(path)
    with pytest.raises(cfg.ConfigError, match="is not a regular file"):
        cfg.load("/dev/null")
    with pytest.raises(cfg.ConfigError, match="cannot be read: File name too long; pass --config"):
        cfg.load(tmp_path / ("x" * 5000))
    with pytest.raises(cfg.ConfigError, match="cannot be read"):
        cfg.missing_keys(path)  # the resume path reads the same file the same way


def test_nan_and_infinity_are_refused_with_their_key():
    with pytest.raises(cfg.ConfigError, match=r"^invalid configuration: learner.target_entropy \(from --set\): "
                       r"Input should be a finite number, got nan$"):
        cfg.load(None, ["learner.target_entropy=nan"])
    with pytest.raises(cfg.ConfigError, match=r"learner.schedule.replay_mb \(from --set\): Input should be a finite number"):
        cfg.load(None, ["learner.schedule.replay_mb=inf"])


# ---------------------------------------------------------------- settings that contradict each other

def test_ring_not_larger_than_the_stack_names_both_keys_values_and_origins(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[observation]\nstack = 4\n")
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load(path, ["ring.capacity=4"])
    assert str(err.value) == (
        "invalid configuration: ring.capacity = 4 must be larger than observation.stack = 4 (the ring serves the "
        "newest observation.stack frames while the next is written): raise ring.capacity or lower observation.stack "
        f"(from --set: ring.capacity; from {path}: observation.stack)")
    assert cfg.load(path, ["ring.capacity=5"]).ring.capacity == 5


def test_a_batch_larger_than_the_replay_fails_at_load_with_what_the_replay_holds():
    frame = 64 * 64 * 3
    assert replay_capacity(cfg.load(None, ["learner.schedule.replay_mb=1"])) == 2**20 // (frame + 64) == 84
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load(None, ["learner.schedule.replay_mb=1", "learner.schedule.batch_size=512"])
    assert str(err.value) == (
        "invalid configuration: learner.schedule.replay_mb = 1 holds 84 transitions of 64x64x3 frames; learner.schedule.batch_size = "
        "512 needs at least 512: raise learner.schedule.replay_mb (to 6.1 or more) or lower learner.schedule.batch_size (from --set)")
    assert replay_capacity(cfg.load(None, ["learner.schedule.replay_mb=6.1", "learner.schedule.batch_size=512"])) >= 512
    # a huge batch fails the same way at once, instead of allocating until the kernel kills the process
    with pytest.raises(cfg.ConfigError, match=r"learner.schedule.replay_mb = 600 holds 50934 transitions of 64x64x3 frames; "
                       r"learner.schedule.batch_size = 10000000000 needs .*\(from --set: learner.schedule.batch_size; defaults: "
                       r"learner.schedule.replay_mb\)"):
        cfg.load(None, ["learner.schedule.batch_size=10000000000"])
    grey = cfg.load(None, ["observation.grayscale=true", "observation.width=32", "observation.height=32"])
    assert replay_capacity(grey) == int(600 * 2**20 / (32 * 32 + 64))


def test_replay_capacity_is_what_the_learner_allocates():
    from explorer.agent.replay import Replay

    config = cfg.load(None, ["learner.schedule.replay_mb=0.5", "observation.grayscale=true", "observation.stack=4"])
    frame = cfg.frame_shape(config.observation)
    assert frame == (64, 64, 1)
    assert Replay(frame, 4, 7, 0.5, 0).capacity == replay_capacity(config) == 126
    assert Replay((8, 8, 1), 3, 7, 0.0001, 0).capacity == cfg.replay_slots((8, 8, 1), 3, 0.0001) == 12  # the floor


def test_a_replay_too_small_for_one_transition_is_refused_and_the_smallest_allowed_one_samples():
    """At the bound the learner trains across episode starts; one frame fewer and sampling would never end."""
    import signal

    import numpy as np

    from explorer.agent.schedule import UpdateSchedule
    from explorer.agent.trainer import InlineTrainer
    from explorer.run.builder import build_agent
    from explorer.run.driver import Driver
    from explorer.run.observers import Training
    from explorer.testing.fakes import FakeEnv, FakeScreen

    grey16 = ["observation.width=16", "observation.height=16", "observation.grayscale=true", "observation.stack=2",
              "learner.n_step=1", "learner.action_repeat=5", "learner.schedule.batch_size=2", "learner.schedule.warmup_steps=0",
              "learner.networks.filters=[4]", "learner.networks.hidden=8", "learner.networks.feature=8", "novelty.signal=pixel"]
    bound = 2 * 2 + (1 + 1) * 5 - 1  # 13 frames
    per_frame = 16 * 16 + 64
    with pytest.raises(cfg.ConfigError, match=r"learner.schedule.replay_mb = 0.0038147 holds 12 transitions of 16x16x1 "
                       r"frames, but one transition reaches back .* = 13 frames \(observation.stack = 2, "
                       r"learner.n_step = 1, learner.action_repeat = 5\), so no transition could be sampled"):
        cfg.load(None, [*grey16, f"learner.schedule.replay_mb={(bound - 0.5) * per_frame / 2**20}"])
    config = cfg.load(None, [*grey16, f"learner.schedule.replay_mb={(bound + 0.5) * per_frame / 2**20}"])
    agent = build_agent(config, (16, 16, 1))
    assert agent.replay.capacity == bound
    rng = np.random.default_rng(0)
    screen = FakeScreen([rng.integers(0, 255, (16, 16, 1), dtype=np.uint8) for _ in range(2)])
    driver = Driver(FakeEnv(screen, stack=2, episode_steps=40), agent.actor)
    Training(InlineTrainer(agent.learner, UpdateSchedule.from_config(config.learner)), lambda: agent.actor.steps).attach(driver)

    def hung(*_):
        raise TimeoutError("replay sampling did not return")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        driver.run(max_steps=130)  # across three episode starts, where a transition reaches back furthest
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert int(agent.learner.updates.numpy()) > 100


def test_encoder_deeper_than_the_frames_allow_is_refused():
    assert [cfg.conv_layers_fitting(n) for n in (2, 3, 6, 7, 15, 16, 64)] == [0, 1, 1, 2, 3, 3, 5]
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load(None, ["learner.networks.filters=[8, 8, 8, 8, 8, 8]"])
    assert str(err.value) == (
        "invalid configuration: learner.networks.filters = [8, 8, 8, 8, 8, 8] asks for 6 convolutions (kernel 3, stride 2), "
        "but frames of observation.height = 64 by observation.width = 64 pixels go through at most 5: drop entries "
        "from learner.networks.filters or raise observation.height and observation.width (from --set: learner.networks.filters; "
        "defaults: observation.height, observation.width)")
    assert cfg.load(None, ["learner.networks.filters=[8, 8, 8, 8, 8]"]).learner.networks.filters == (8,) * 5


def test_novelty_cnn_on_tiny_frames_and_augment_beyond_the_picture_are_refused():
    tiny = ["observation.width=6", "observation.height=6", "learner.networks.filters=[4]"]
    with pytest.raises(cfg.ConfigError, match=r"^invalid configuration: novelty.signal = rnd reads frames with a CNN "
                       r"of 2 convolutions .* needs at least 7 by 7 pixels, .*: raise them, or use novelty.signal = "
                       r"pixel or episodic \("):
        cfg.load(None, [*tiny, "novelty.signal=rnd"])
    with pytest.raises(cfg.ConfigError, match="novelty.embedding = pooled reads frames .* use novelty.embedding = histogram"):
        cfg.load(None, [*tiny, "novelty.embedding=pooled"])
    assert cfg.load(None, tiny).novelty.embedding == "histogram"  # the default needs no CNN
    with pytest.raises(cfg.ConfigError, match=r"learner.networks.augment = 65 pads each picture by more than its size "
                       r"\(observation.height = 64, observation.width = 64\): lower learner.networks.augment to 64 or less"):
        cfg.load(None, ["learner.networks.augment=65"])


def test_episodic_memory_that_excludes_everything_is_refused_only_where_it_is_used():
    with pytest.raises(cfg.ConfigError, match=r"novelty.exclude_recent = 1024 ignores all novelty.episode_capacity = "
                       r"1024 embeddings .* \(from --set: novelty.exclude_recent; defaults: novelty.episode_capacity\)"):
        cfg.load(None, ["novelty.exclude_recent=1024"])
    assert cfg.load(None, ["novelty.exclude_recent=1024", "novelty.episodic_reward=new_place"])  # new_place ignores it
    assert cfg.load(None, ["novelty.exclude_recent=1024", "novelty.signal=pixel"])


def test_several_problems_are_listed_one_a_line():
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load(None, ["ring.capacity=2", "learner.networks.augment=100", "run.seed=x"])
    # the wrong type stops validation before the checks across keys, and one problem is one line
    assert str(err.value).startswith("invalid configuration: run.seed (from --set): Input should be a valid integer")
    assert "\n" not in str(err.value)
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load(None, ["ring.capacity=2", "learner.networks.augment=100"])
    lines = str(err.value).splitlines()
    assert [line.split(" = ")[0] for line in lines] == ["invalid configuration:", "  ring.capacity", "  learner.networks.augment"]


def test_the_memory_estimate_counts_the_largest_buffers_and_refuses_what_does_not_fit():
    from explorer.agent.memory import check_memory, memory_needed

    config = cfg.Config()
    need = memory_needed(config)
    first_conv = 31 * 31 * 16  # 64 -> 31 pixels, 16 filters
    assert need["replay"] == 50934 * (64 * 64 * 3 + 64) and need["ring"] == 64 * 64 * 64 * 3
    # the default shares the critic's encoder with the actor: two encoder passes, three encoder copies (Adam: x3)
    assert need["batch"] == 32 * (2 * 64 * 64 * 9 * 5 + 4 * 2 * first_conv)
    assert need["networks"] == 4 * (7 * 7 * 32 * 128 * 4 + 256**2 * 11)
    separate = memory_needed(config.replace(**{"learner.networks.shared_encoder": False}))
    assert separate["batch"] == 32 * (2 * 64 * 64 * 9 * 5 + 4 * 4 * first_conv)
    assert separate["networks"] == 4 * (7 * 7 * 32 * 128 * 7 + 256**2 * 11)
    assert need["novelty"] == 1024 * 216 * 4 and need["record"] == 0
    check_memory(config, available=sum(need.values()))
    with pytest.raises(cfg.ConfigError) as err:
        check_memory(config, available=sum(need.values()) - 1)
    assert str(err.value) == ("this run needs at least 0.6 GiB of memory but 0.6 GiB are free: replay 0.6 GiB "
                              "(learner.schedule.replay_mb = 600); batch 0.0 GiB (learner.schedule.batch_size = 32); lower "
                              "learner.schedule.replay_mb or learner.schedule.batch_size, or free memory")
    with pytest.raises(cfg.ConfigError) as err:
        check_memory(config.replace(**{"learner.schedule.replay_mb": 8000.0}), available=4 * 2**30)
    assert str(err.value) == ("this run needs at least 7.8 GiB of memory but 4.0 GiB are free: replay 7.8 GiB "
                              "(learner.schedule.replay_mb = 8000); lower learner.schedule.replay_mb, or free memory")
    with pytest.raises(cfg.ConfigError, match=r"networks 147.5 GiB \(learner.networks.hidden = 60000, learner.networks.feature = 128\); "
                       r"lower learner.networks.hidden or learner.networks.feature, or free memory$"):
        check_memory(config.replace(**{"learner.networks.hidden": 60000}), available=4 * 2**30)
    # a recurrent core's inputs ride in each slot's two contexts: 16 steps of 25 values and 64 units, float32
    recurrent = config.replace(**{"learner.networks.recurrent_units": 64})
    assert memory_needed(recurrent)["replay"] == 50934 * (64 * 64 * 3 + 64 + 2 * 4 * (16 * 25 + 64))
    with pytest.raises(cfg.ConfigError, match=r"replay 0.8 GiB \(learner.schedule.replay_mb = 600, "
                                              r"learner.networks.recurrent_window = 16\)"):
        check_memory(recurrent, available=2**29)


def test_a_config_loads_whatever_memory_is_free(monkeypatch):
    import psutil

    def no_probe():
        raise AssertionError("loading a config asked the machine for its free memory")

    monkeypatch.setattr(psutil, "virtual_memory", no_probe)
    assert cfg.load(None, []).learner.schedule.replay_mb == 600
    big = cfg.load(None, ["learner.schedule.replay_mb=1500000", "learner.schedule.batch_size=1000", "learner.networks.hidden=60000"])
    assert (big.learner.schedule.replay_mb, big.learner.networks.hidden) == (1500000, 60000)
    assert big.replace(**{"run.steps": 10}).learner.schedule.replay_mb == 1500000


def test_the_free_memory_is_what_the_machine_reports(monkeypatch):
    import psutil

    from explorer.agent import memory

    class Machine:
        available = 3 * 2**30

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Machine())
    assert memory.free_memory() == 3 * 2**30
    memory.check_memory(cfg.Config())  # 0.6 GiB fit in 3 GiB
    with pytest.raises(cfg.ConfigError, match=r"^this run needs at least 3.9 GiB of memory but 3.0 GiB are free: "):
        memory.check_memory(cfg.load(None, ["learner.schedule.replay_mb=3500", "learner.schedule.batch_size=1000"]))


def test_an_explore_run_that_cannot_learn_is_warned_about_not_refused():
    assert cfg.explore_warnings(cfg.Config()) == []
    (warning,) = cfg.explore_warnings(cfg.load(None, ["run.steps=160"]))
    assert warning == ("run.steps = 160 ends before learner.schedule.warmup_steps = 1000: the actor never acts and nothing is "
                       "learned, so this run measures the warm-up's random sticks; raise run.steps or lower "
                       "learner.schedule.warmup_steps")
    (warning,) = cfg.explore_warnings(cfg.load(None, ["run.steps=1500", "learner.schedule.batch_size=400",
                                                      "learner.action_repeat=4"]))
    assert warning.startswith("run.steps = 1500 ends before the first update")
    assert cfg.explore_warnings(cfg.load(None, ["run.steps=160", "run.agent=sticky"])) == []
    (warning,) = cfg.explore_warnings(cfg.load(None, ["run.steps=3000", "learner.schedule.update_every=4000"]))
    assert warning == ("learner.schedule.update_every = 4000 puts the first update at step 4000, after run.steps = 3000: "
                       "nothing is learned; lower learner.schedule.update_every or raise run.steps")
    assert cfg.explore_warnings(cfg.load(None, ["run.steps=4000", "learner.schedule.update_every=4000"])) == []
    # a replay too short to reach the first update learns nothing either
    assert cfg.replay_warnings(cfg.Config(), 303) == [
        "replaying 303 recorded steps ends before the first update, at step 1000 (learner.schedule.warmup_steps = 1000, "
        "learner.schedule.batch_size = 32, learner.schedule.update_every = 1): nothing is learned; lower learner.schedule.warmup_steps, or "
        "replay more (--epochs, more sessions)"]
    assert cfg.replay_warnings(cfg.load(None, ["learner.schedule.warmup_steps=100"]), 303) == []


@pytest.mark.parametrize("key", ["learner.seed", "novelty.seed"])
def test_a_seed_too_large_for_the_libraries_is_refused_at_load(key):
    # 2**64 reached TensorFlow as an out-of-range integer: a traceback when the learner was built
    with pytest.raises(ConfigError, match=rf"^invalid configuration: {key} \(from --set\): Input should be less than "
                                          rf"or equal to 4294967295, got 18446744073709551616$"):
        load(None, [f"{key}={2**64}"])
    assert getattr(load(None, [f"{key}=4294967295"]), key.split(".")[0]).seed == 4294967295


def test_the_largest_run_seed_derives_seeds_in_range():
    config = load(None, ["run.seed=4294967295"])
    assert config.seeds() == {"run.seed": 4294967295, "game.seed": 4294967295, "learner.seed": 4294967295,
                              "novelty.seed": 0}  # run.seed + 1, wrapped to 32 bits


GYM = ["game.name=gym", 'game.id="MiniGrid-Empty-5x5-v0"']


@pytest.mark.parametrize("sets, says", [
    (["novelty.signal=rnd"], 'needs novelty.signal = "episodic" (only the episodic memory compares frames by heading), '
                             "but novelty.signal = rnd: set novelty.signal = episodic, or novelty.heading_window = 0"),
    (["novelty.signal=pixel"], 'needs novelty.signal = "episodic" (only the episodic memory compares frames by heading), '
                               "but novelty.signal = pixel: set"),
    (GYM, "needs a turn rate on game.name = gym (its actions turn no view by a known angle): set novelty.turn_rate to "
          "the degrees the view turns per step at full camera x, or novelty.heading_window = 0"),
    (["game.realtime=true"], "needs a turn rate on game.realtime = true (a step is a tick of control.hz, not "
                             "game.frame_skip tics: the view turns about game.turn_scale x 35 tics/s / control.hz = "
                             "11.7 degrees in one): set novelty.turn_rate to the degrees"),
])
def test_a_heading_window_that_cannot_work_is_refused_at_load(sets, says):
    # it was a silent no-op (another signal, a Gymnasium game) or turned at the headless game's rate (real time)
    with pytest.raises(ConfigError) as err:
        load(None, ["novelty.heading_window=30", *sets])
    assert str(err.value).startswith(f"invalid configuration: novelty.heading_window = 30 {says}")
    assert "\n" not in str(err.value)


def test_a_heading_window_with_a_turn_rate_loads():
    assert load(None, ["novelty.heading_window=30"]).novelty.heading_window == 30  # the built-in game's 40 degrees
    assert cfg.turn_rate(load(None, ["novelty.heading_window=30", "game.name=synthetic"])) == 40.0  # turns as it does
    for sets in (GYM, ["game.realtime=true"]):
        assert cfg.turn_rate(load(None, ["novelty.heading_window=30", "novelty.turn_rate=12", *sets])) == 12.0
    assert load(None, ["novelty.signal=rnd"]).novelty.heading_window == 0  # the default bothers no signal


def test_a_live_game_needs_its_own_turn_rate():
    from explorer.config.schema import check_live_turn_rate
    with pytest.raises(ConfigError, match=r"^novelty.heading_window = 30 needs a turn rate on a live game \(not the "
                       r"headless built-in game's game.turn_scale x game.frame_skip = 40 degrees a step\): set "
                       r"novelty.turn_rate to the degrees the view turns per step at full camera x, or "
                       r"novelty.heading_window = 0$"):
        check_live_turn_rate(load(None, ["novelty.heading_window=30"]))
    check_live_turn_rate(load(None, ["novelty.heading_window=30", "novelty.turn_rate=6"]))  # measured: plays
    check_live_turn_rate(load(None, []))  # no window, nothing to check


def test_play_refuses_a_heading_window_without_the_live_games_turn_rate_before_it_captures(monkeypatch):
    from explorer.envs.live import capture
    from explorer.run.play import play

    def no_capture(*args, **kwargs):
        raise AssertionError("play went on to capture the screen")

    monkeypatch.setattr(capture, "make_screen", no_capture)
    with pytest.raises(ConfigError, match=r"^novelty.heading_window = 30 needs a turn rate on a live game"):
        play(load(None, ["novelty.heading_window=30"]), dry_run=True)


def _meta(source, *sets):
    return {"source": source, "config": load(None, list(sets)).to_dict()}


def test_recorded_sessions_say_their_games_turn_rate_or_a_heading_window_is_refused():
    from explorer.config.schema import check_recorded_turn_rate, recorded_turn_rate
    window = load(None, ["novelty.heading_window=30"])
    assert recorded_turn_rate(_meta("game")) == 40.0  # the headless built-in game, from the config it kept
    assert recorded_turn_rate(_meta("game", "game.frame_skip=2")) == 20.0
    assert recorded_turn_rate(_meta("screen", "novelty.turn_rate=12")) == 12.0  # measured by whoever recorded it
    for unknown in (_meta("screen"), _meta("game", *GYM), _meta("game", "game.realtime=true"), {"source": "game"},
                    {"source": "game", "config": "not a table"}, {"source": "game", "config": {"game": {"turn_scale": "x"}}}):
        assert recorded_turn_rate(unknown) == 0.0  # a screen, a Gymnasium or real-time game, a foreign session
    check_recorded_turn_rate(window, {"a": _meta("game"), "b": _meta("game")})  # the settings' 40: as they ran
    with pytest.raises(ConfigError, match=r"^novelty.heading_window = 30 needs a turn rate on the game s recorded "
                       r"\(the session does not say one: a screen, or a Gymnasium or real-time game\): set "
                       r"novelty.turn_rate to the degrees the view turns per step at full camera x, or "
                       r"novelty.heading_window = 0$"):
        check_recorded_turn_rate(window, {"a": _meta("game"), "s": _meta("screen")})
    with pytest.raises(ConfigError, match=r"^novelty.heading_window = 30 would turn the heading 40 degrees a step "
                       r"\(game.turn_scale x game.frame_skip\), but the recorded game turned 20 in a, b: set "
                       r"novelty.turn_rate = 20, or novelty.heading_window = 0$"):
        check_recorded_turn_rate(window, {"a": _meta("game", "game.frame_skip=2"), "b": _meta("game", "game.frame_skip=2")})
    with pytest.raises(ConfigError, match=r"turned 20 in b; 12 in c: replay sessions of one turn rate together and set "
                       r"novelty.turn_rate to it, or novelty.heading_window = 0$"):
        check_recorded_turn_rate(window, {"a": _meta("game"), "b": _meta("game", "game.frame_skip=2"),
                                          "c": _meta("screen", "novelty.turn_rate=12")})
    check_recorded_turn_rate(load(None, ["novelty.heading_window=30", "novelty.turn_rate=9"]), {"s": _meta("screen")})
    check_recorded_turn_rate(load(None, []), {"s": _meta("screen")})


def test_replay_refuses_a_heading_window_on_a_screen_session_in_one_line(tmp_path, capsys):
    import numpy as np

    from explorer import cli
    from explorer.envs.sessions.writer import Recorder

    with Recorder(tmp_path / "screen", {"source": "screen", "config": load(None, []).to_dict()}, chunk_frames=4,
                  block_s=None, buttons=("a",)) as rec:
        for i in range(8):
            rec.add(np.full((16, 16, 3), i, np.uint8), np.zeros(5, np.float32), 0.0, first=i == 0, last=i == 7)
    assert cli.main(["replay", str(tmp_path / "screen"), "--out", str(tmp_path / "runs"), "--no-progress",
                     "--set", "novelty.heading_window=30", "--set", "learner.schedule.replay_mb=2",
                     "--set", "learner.schedule.warmup_steps=0", "--set", "learner.schedule.batch_size=1"]) == 2
    err = capsys.readouterr().err
    assert err == (f"explorer: novelty.heading_window = 30 needs a turn rate on the game {tmp_path / 'screen'} "
                   f"recorded (the session does not say one: a screen, or a Gymnasium or real-time game): set "
                   f"novelty.turn_rate to the degrees the view turns per step at full camera x, or "
                   f"novelty.heading_window = 0\n")
    assert not list((tmp_path / "runs").glob("*"))  # refused before a run directory was kept
