"""``explorer replay``: a damaged session, a signal and a wrong checkpoint path each end in one line, and
what was trained is kept."""

from __future__ import annotations

import json
import re
import shutil
import signal

import pytest
from test_safety import SMALL, explorer_process, last_line, wait_for

from explorer import cli
from explorer.agent.checkpoint import latest_checkpoint

REPLAY = ["--set", "learner.schedule.warmup_steps=20", "--set", "learner.schedule.batch_size=8", "--set", "learner.networks.filters=[4]",
          "--set", "learner.networks.hidden=16", "--set", "learner.networks.feature=16", "--set", "learner.schedule.replay_mb=2",
          "--set", "run.log_every=10"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A 200-step explore run recorded as a session (chunks of 64 frames), and its run directory."""
    root = tmp_path_factory.mktemp("recorded")
    assert cli.main(["explore", "--steps", "200", "--out", str(root / "runs"), "--record", str(root / "sessions"),
                     "--no-progress", *SMALL]) == 0
    (run,), (session,) = list((root / "runs").iterdir()), list((root / "sessions").iterdir())
    assert len(list((session / "chunks").iterdir())) == 4
    return session, run


def test_a_damaged_chunk_stops_replay_with_its_own_message_and_keeps_what_was_trained(tmp_path, recorded, capsys):
    session = shutil.copytree(recorded[0], tmp_path / "damaged")
    chunk = session / "chunks" / "000002.npz"
    chunk.write_bytes(chunk.read_bytes()[:1000])  # cut short, as by a full disk or a copy that stopped
    assert cli.main(["replay", str(session), "--out", str(tmp_path / "runs"), "--no-progress", *REPLAY]) == 1
    (run,) = (tmp_path / "runs").iterdir()
    kept = latest_checkpoint(run / "checkpoints")
    assert kept is not None
    steps = int(kept.rsplit("-", 1)[1])
    assert 100 < steps < 128  # the two whole chunks before the damage, less the first observation's frames
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err == (f"explorer: {chunk}: truncated or corrupt chunk (BadZipFile: File is not a zip file); replay stopped "
                   f"there: the {steps} transitions before it were trained; kept checkpoint {kept} and run directory "
                   f"{run}\n")
    # the kept checkpoint is whole: it evaluates on the part of the session that reads
    whole = shutil.copytree(recorded[0], tmp_path / "whole")
    assert cli.main(["replay", str(whole), "--evaluate", kept, "--out", str(tmp_path / "eval")]) == 0


def test_a_damaged_first_chunk_trains_nothing_and_leaves_no_run(tmp_path, recorded, capsys):
    session = shutil.copytree(recorded[0], tmp_path / "damaged")
    (session / "chunks" / "000000.npz").write_text("overwritten")
    assert cli.main(["replay", str(session), "--out", str(tmp_path / "runs"), "--no-progress", *REPLAY]) == 1
    assert capsys.readouterr().err == (
        f"explorer: {session}/chunks/000000.npz: truncated or corrupt chunk (not an .npz archive: empty, cut short or "
        "overwritten); replay stopped there: nothing was trained\n")
    assert list((tmp_path / "runs").iterdir()) == []


def test_sigint_stops_replay_at_a_transition_and_keeps_its_checkpoint(tmp_path, recorded):
    out = tmp_path / "runs"
    proc = explorer_process("replay", str(recorded[0]), "--epochs", "1000", "--out", str(out), "--no-progress", *REPLAY)
    wait_for(lambda: any(p.stat().st_size for p in out.glob("*/metrics.jsonl")), proc, "metric line")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 130
    (run,) = out.iterdir()
    summary = json.loads((run / "summary.json").read_text())
    n = summary["transitions"]
    assert summary["stopped_by"] == "SIGINT" and summary["checkpoint"] == f"{run}/checkpoints/learner-{n}"
    assert last_line(err) == (f"explorer: stopped by SIGINT after {n} transitions; kept checkpoint "
                              f"{summary['checkpoint']} and run directory {run}")


def test_evaluate_names_what_is_wrong_with_the_checkpoint_path(tmp_path, recorded, capsys):
    session, run = recorded
    (tmp_path / "fresh" / "checkpoints").mkdir(parents=True)
    hint = ("give the run directory of an explore, play or replay run, or one of its checkpoints "
            "(<run>/checkpoints/learner-N)")
    cases = {tmp_path / "missing": f"{tmp_path / 'missing'} does not exist; {hint}",
             tmp_path: f"{tmp_path} is neither a run directory (it has no checkpoints/ folder) nor a checkpoint; {hint}",
             tmp_path / "fresh": f"{tmp_path / 'fresh' / 'checkpoints'} holds no checkpoint: the run stopped before "
                                 f"it wrote one; {hint}",
             run / "checkpoints" / "learner-7": f"checkpoint {run / 'checkpoints' / 'learner-7'} does not exist; the "
                                                f"run's checkpoints are: learner-200"}
    for path, message in cases.items():
        assert cli.main(["replay", str(session), "--evaluate", str(path), "--out", str(tmp_path / "eval")]) == 1
        assert capsys.readouterr().err == f"explorer: {message}\n"
    assert not (tmp_path / "eval").exists() or list((tmp_path / "eval").iterdir()) == []
    # the checkpoints folder itself, and a checkpoint's index file, name checkpoints too
    for path in (run / "checkpoints", run / "checkpoints" / "learner-200.index"):
        assert cli.main(["replay", str(session), "--evaluate", str(path), "--out", str(tmp_path / "eval")]) == 0
    assert re.search(r"200 transitions; novelty mean", capsys.readouterr().out)


def test_a_replay_run_resumed_by_explore_keeps_its_summary(tmp_path, recorded):
    out = tmp_path / "runs"
    assert cli.main(["replay", str(recorded[0]), "--out", str(out), "--no-progress", *REPLAY]) == 0
    (run,) = out.iterdir()
    replayed = json.loads((run / "summary.json").read_text())
    assert replayed["transitions"] > 100 and replayed["sessions"] == [str(recorded[0])]
    done = replayed["transitions"]  # the agent's steps so far
    assert cli.main(["explore", "--resume", str(run), "--steps", str(done + 30), "--no-progress"]) == 0
    resumed = json.loads((run / "summary.json").read_text())
    assert resumed["steps"] == 30 and resumed["earlier"] == [replayed]  # the replay's sessions and transitions stay
    assert cli.main(["explore", "--resume", str(run), "--steps", str(done + 60), "--no-progress"]) == 0
    again = json.loads((run / "summary.json").read_text())
    assert again["resumed_at"] == done + 30 and again["earlier"] == [replayed, {k: v for k, v in resumed.items() if k != "earlier"}]
