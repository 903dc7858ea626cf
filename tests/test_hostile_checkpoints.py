"""Damaged or hostile checkpoints: every value a part reads back is checked (a bad one skips the
checkpoint for the one before it, naming the file and the field), and a checkpoint that does not fit
is explained by the settings that differ from its run's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from explorer.config import Config, dump


def one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text, text
    return text


# ---------------------------------------------------------------- checkpoints

SMALL = {"learner.schedule.batch_size": 8, "learner.schedule.warmup_steps": 16, "learner.schedule.update_every": 1, "learner.schedule.replay_mb": 1.0,
         "learner.networks.filters": (4,), "learner.networks.feature": 16, "learner.networks.hidden": 16}
FRAME = (12, 12, 3)


def small_agent(buttons=("a",)):
    from explorer.run.builder import build_agent

    config = Config().replace(**SMALL, **{"novelty.signal": "pixel"})
    config = config.replace(**{"pad.buttons": list(buttons)})
    return build_agent(config, FRAME), config


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    """A run directory (config.toml, checkpoints of steps 10 and 20) of a small agent that acted 30 steps."""
    import tensorflow as tf

    from explorer.core import Step

    run = tmp_path_factory.mktemp("run")
    agent, config = small_agent()
    dump(config, run / "config.toml")
    rng = np.random.default_rng(0)
    frames = [tf.constant(rng.integers(0, 255, (3, *FRAME), dtype=np.uint8)) for _ in range(31)]
    ckpt = agent.checkpointer(run / "checkpoints")
    for i in range(30):
        step, nxt = Step(frames[i], first=i == 0), Step(frames[i + 1])
        agent.actor.observe(step, agent.actor.act(step), nxt)
        if i + 1 in (10, 20):
            ckpt.save(i + 1)
    return run


def damaged_copy(saved_run: Path, tmp_path: Path, part: str, edit) -> Path:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(saved_run, run)
    target = run / "checkpoints" / "state-20" / part
    edit(target)
    return run


def edit_json(**changes):
    def edit(path: Path) -> None:
        value = json.loads(path.read_text())
        for key, v in changes.items():
            where, *rest = key.split(".")
            node = value
            for k in [where, *rest][:-1]:
                node = node[k]
            node[[where, *rest][-1]] = v
        path.write_text(json.dumps(value))
    return edit


def edit_npz(**changes):
    def edit(path: Path) -> None:
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        for k, v in changes.items():
            if v is None:
                del arrays[k]
            else:
                arrays[k] = v(arrays[k]) if callable(v) else v
        np.savez(path, **arrays)
    return edit


@pytest.mark.parametrize("part, edit, field", [
    ("actor/actor.json", edit_json(steps="abc"), "steps = 'abc'"),
    ("actor/actor.json", edit_json(steps=-5), "steps = -5"),
    ("actor/actor.json", edit_json(noise=[0.1, 0.2]), "noise = [0.1, 0.2]"),
    ("actor/actor.json", edit_json(noise=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]), "noise has 7 values, its actions 5"),
    ("actor/actor.json", edit_json(held_steps=10**30), "held_steps = "),
    ("actor/actor.json", edit_json(**{"context.episode_step": "x"}), "context.episode_step = 'x'"),
    ("actor/actor.json", edit_json(rng={"bit_generator": "PCG64", "state": "abc"}), "rng is not a PCG64 state"),
    ("adder/adder.json", edit_json(obs_ids=[10**30, 1, 2]), "obs_ids.0 = "),
    ("adder/adder.json", edit_json(obs_ids=[1, 2]), "frame-id stacks have [2, 3] ids"),
    ("adder/adder.json", edit_json(pending="none"), "pending = 'none'"),
    ("sampler/sampler.json", edit_json(state={"state": -1, "inc": 3}), "sampler state is not a PCG64 state"),
    ("replay/replay.npz", edit_npz(obs_ids=lambda a: a + 10**12), "obs_ids holds frame ids from"),
    ("replay/replay.npz", edit_npz(counters=np.array([-1, 5], np.int64)), "counters = [-1, 5]"),
    ("replay/replay.npz", edit_npz(ctx=None), "ctx missing"),
    ("replay/replay.npz", edit_npz(reward=lambda a: a * np.nan), "reward holds NaN"),
])
def test_a_bad_value_in_a_checkpoint_part_skips_it_for_the_one_before_with_one_line(saved_run, tmp_path, capfd,
                                                                                 part, edit, field):
    from explorer.agent.checkpoint import CheckpointError

    run = damaged_copy(saved_run, tmp_path, part, edit)
    agent, _ = small_agent()
    assert agent.checkpointer(run / "checkpoints").restore() == 10
    err_lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("explorer:")]
    assert len(err_lines) == 1 and f"state-20/{part.split('/')[0]}/" in err_lines[0] and field in err_lines[0], err_lines
    assert "using learner-10" in err_lines[0]
    with pytest.raises(CheckpointError) as err:  # asked for by name: one line, the file and the field
        small_agent()[0].checkpointer(run / "checkpoints").restore(run / "checkpoints" / "learner-20")
    assert f"state-20/{part.split('/')[0]}/{part.split('/')[1]} holds a bad value: " in one_line(err)
    assert field in str(err.value)


def test_resuming_with_other_buttons_names_the_buttons_and_the_setting(saved_run, capfd):
    from explorer.agent.checkpoint import CheckpointError

    agent, _ = small_agent(buttons=("b", "rt"))
    with pytest.raises(CheckpointError) as err:
        agent.checkpointer(saved_run / "checkpoints").restore()
    message = one_line(err)
    assert message.startswith(f"checkpoint {saved_run / 'checkpoints' / 'learner-20'} does not fit this agent: its run "
                              f"({saved_run / 'config.toml'}) was trained with pad.buttons = [\"a\"] (the settings in "
                              "use have [\"b\", \"rt\"]); to continue it, leave out the --set or --config that changed "
                              """it, or pass --set 'pad.buttons=["a"]'"""), message
    assert "network sizes" not in message and "--config " + str(saved_run / "config.toml") not in message
    assert "explorer: skipped" not in capfd.readouterr().err  # a mismatch is not damage: nothing is skipped


def test_a_mismatch_names_the_settings_that_differ_from_its_run_or_says_none_does(saved_run, tmp_path):
    import shutil

    from explorer.agent.checkpoint import CheckpointError
    from explorer.run.builder import build_agent

    _, config = small_agent()
    wider = config.replace(**{"learner.networks.hidden": 24})
    with pytest.raises(CheckpointError) as err:
        build_agent(wider, FRAME).checkpointer(saved_run / "checkpoints").restore()
    message = one_line(err)
    assert "was trained with learner.networks.hidden = 16 (the settings in use have 24)" in message
    assert "--set 'learner.networks.hidden=16'" in message and "network sizes" not in message
    run = tmp_path / "run"
    shutil.copytree(saved_run, run)
    dump(wider, run / "config.toml")  # its config.toml edited after the run: nothing tells the settings apart
    with pytest.raises(CheckpointError) as err:
        build_agent(wider, FRAME).checkpointer(run / "checkpoints").restore()
    assert "although the settings in use match those of its run" in one_line(err)
    assert "--config" not in str(err.value)
