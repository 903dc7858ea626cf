"""Stopping on signals: the first ends the run at a step and keeps what it did; a second stops it at once.

The runs are real processes of the command line, sent real signals.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from explorer import cli
from explorer.core import Stopped
from explorer.run.driver import Controls
from explorer.run.safety import Kept, stop_on_signals

SMALL = ["--set", "game.episode_steps=50", "--set", "learner.warmup_steps=20", "--set", "learner.batch_size=8",
         "--set", "learner.filters=[4]", "--set", "learner.hidden=16", "--set", "learner.feature=16",
         "--set", "learner.replay_mb=2"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_second_signal_stops_at_once_after_the_write_under_way(tmp_path, sig):
    controls, written = Controls(), []
    (tmp_path / "checkpoints").mkdir()
    before = signal.getsignal(sig)
    kept = Kept(run_dir=tmp_path, checkpoints=tmp_path / "checkpoints")
    with pytest.raises(Stopped) as err, stop_on_signals(controls, kept, announce=False) as signals:
        signal.raise_signal(sig)
        assert controls.stop.is_set() and controls.reason == sig.name  # the first only asks
        with signals.held():
            signal.raise_signal(sig)
            written.append("the whole checkpoint")  # the second waits for the write under way
        written.append("more")
    assert written == ["the whole checkpoint"]
    assert err.value.signum == sig
    assert str(err.value) == f"stopped at once by a second {sig.name}; the pad is neutral; kept run directory {tmp_path}"
    assert signal.getsignal(sig) is before


def test_a_stop_already_under_way_keeps_its_reason():
    controls = Controls()
    controls.request_stop("stop key f12")
    with stop_on_signals(controls, announce=False):
        signal.raise_signal(signal.SIGINT)
    assert controls.reason == "stop key f12"


def test_a_signal_the_process_was_started_ignoring_stays_ignored():
    """``nohup`` ignores SIGHUP so that a run outlives its terminal: it must not stop the run."""
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        controls = Controls()
        with stop_on_signals(controls, announce=False):
            signal.raise_signal(signal.SIGHUP)
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert not controls.stop.is_set()
    finally:
        signal.signal(signal.SIGHUP, before)


def wait_for(predicate, proc: subprocess.Popen, what: str, timeout_s: float = 240.0) -> None:
    deadline = time.monotonic() + timeout_s  # a loaded machine gets more time, not a weaker check
    while not predicate():
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {what}: {proc.communicate()[1][-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {what} within {timeout_s:.0f} s")
        time.sleep(0.2)


def explorer_process(*args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "explorer.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=child_env(**env))


def child_env(**env: str) -> dict[str, str]:
    """This process's environment, with its module path (the explorer under test) and quiet TensorFlow."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TF_CPP_MIN_LOG_LEVEL": "3", **env}


def loading_tensorflow(proc: subprocess.Popen) -> bool:
    """The command runs: it imports TensorFlow before it makes anything (Linux: the process's memory map)."""
    try:
        return b"tensorflow" in Path(f"/proc/{proc.pid}/maps").read_bytes()
    except OSError:
        return False


def last_line(stderr: str) -> str:
    return [line for line in stderr.splitlines() if line.startswith("explorer: ")][-1]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_explore_run_says_what_it_kept_and_the_resume_it_suggests_works(tmp_path, sig):
    out = tmp_path / "runs"
    proc = explorer_process("explore", "--steps", "5000", "--out", str(out), "--no-progress", "--set",
                            "run.log_every=10", *SMALL)
    wait_for(lambda: any(out.glob("*/metrics.jsonl")), proc, "metric line")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 128 + sig
    (run,) = out.iterdir()
    line = last_line(err)
    m = re.fullmatch(rf"explorer: stopped by {sig.name} at step (\d+) of 5000; kept checkpoint "
                     rf"{re.escape(str(run))}/checkpoints/learner-(\d+) and run directory {re.escape(str(run))}; "
                     rf"continue with: explorer explore --resume {re.escape(str(run))}", line)
    assert m and m[1] == m[2], line
    step = int(m[1])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["stopped_by"] == sig.name and summary["steps"] == step
    assert summary["checkpoint"] == f"{run}/checkpoints/learner-{step}"
    if sig == signal.SIGTERM:  # the command it suggests continues the run
        assert cli.main(["explore", "--resume", str(run), "--steps", str(step + 10), "--no-progress"]) == 0
        assert json.loads((run / "summary.json").read_text())["resumed_at"] == step


def test_a_signalled_play_run_stops_with_the_pad_neutral_and_keeps_checkpoint_and_session(tmp_path, xvfb):
    out, sessions = tmp_path / "runs", tmp_path / "sessions"
    proc = explorer_process("play", "--dry-run", "--region", "0,0,32,32", "--out", str(out), "--record",
                            str(sessions), "--set", "control.countdown_s=0", "--set", "capture.blank_seconds=1000",
                            "--set", "record.chunk_frames=4", *SMALL, DISPLAY=xvfb)
    # the session's step log fills once the loop runs
    wait_for(lambda: any(p.stat().st_size for p in sessions.glob("*/steps.jsonl")), proc, "recorded step")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 143
    (run,), (session,) = list(out.iterdir()), list(sessions.iterdir())
    summary = json.loads((run / "summary.json").read_text())
    ticks = summary["loop"]["steps"]
    assert summary["stopped_by"] == "SIGTERM" and ticks > 0
    assert summary["checkpoint"] == f"{run}/checkpoints/learner-{ticks}"
    assert last_line(err) == (f"explorer: stopped by SIGTERM after {ticks} ticks; kept checkpoint {summary['checkpoint']}, "
                              f"session {session} and run directory {run}; play on from it with --resume {run}")
    assert json.loads((session / "meta.json").read_text())["status"] == "complete"


def test_a_signal_before_the_first_step_leaves_no_run_behind(tmp_path):
    out = tmp_path / "runs"
    proc = explorer_process("explore", "--steps", "5000", "--out", str(out), "--no-progress", *SMALL)
    wait_for(lambda: any(out.glob("*/config.toml")), proc, "run directory")  # the run has started
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 143
    line = last_line(err)
    if " at step 0 " in line:  # the signal came while the game and the agent were being made
        assert line == "explorer: stopped by SIGTERM at step 0 of 5000; nothing was kept"
        assert list(out.iterdir()) == []
    else:  # a fast machine was already stepping: what it did is kept
        assert re.fullmatch(r"explorer: stopped by SIGTERM at step \d+ of 5000; kept checkpoint .*", line), line


def test_sigterm_while_the_command_starts_says_nothing_was_written(tmp_path):
    proc = explorer_process("explore", "--steps", "5000", "--out", str(tmp_path / "runs"), "--no-progress")
    wait_for(lambda: loading_tensorflow(proc), proc, "TensorFlow import")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 143
    assert last_line(err) in ("explorer: stopped by SIGTERM; nothing was written",
                              "explorer: stopped by SIGTERM at step 0 of 5000; nothing was kept")
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []


def test_a_resume_stopped_before_its_first_step_changes_nothing(tmp_path):
    assert cli.main(["explore", "--steps", "40", "--out", str(tmp_path), "--no-progress", *SMALL]) == 0
    (run,) = tmp_path.iterdir()
    before = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}
    proc = explorer_process("explore", "--resume", str(run), "--steps", "5000", "--no-progress")
    wait_for(lambda: loading_tensorflow(proc), proc, "TensorFlow import")
    proc.send_signal(signal.SIGTERM)  # while it imports, restores or starts the game: before its first step
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 143
    assert last_line(err) in ("explorer: stopped by SIGTERM; nothing was written",
                              f"explorer: stopped by SIGTERM at step 40 of 5000; {run} is as it was; "
                              f"continue with: explorer explore --resume {run}")
    after = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".lock"}
    assert after == before


def test_diverged_weights_are_not_checkpointed_and_the_error_names_the_one_before(tmp_path, monkeypatch, capsys):
    import numpy as np

    from explorer.agent.actor import LearningActor

    act = LearningActor.act

    def diverges(self, step):
        return np.full(4, np.nan, np.float32) if self.steps >= 45 else act(self, step)

    monkeypatch.setattr(LearningActor, "act", diverges)
    assert cli.main(["explore", "--steps", "100", "--out", str(tmp_path), "--no-progress", "--set",
                     "learner.checkpoint_every=30", *SMALL]) == 1
    (run,) = tmp_path.iterdir()
    assert sorted(p.name for p in (run / "checkpoints").glob("*.index")) == ["learner-30.index"]
    assert capsys.readouterr().err.splitlines()[-1] == (
        "explorer: the policy produced non-finite stick values [nan, nan, nan, nan] at step 45: the weights have "
        f"diverged; stopping with the pad neutral; kept checkpoint {run}/checkpoints/learner-30 and run directory "
        f"{run}; continue with: explorer explore --resume {run}")


def test_ctrl_c_before_play_takes_the_pad_leaves_nothing(tmp_path, xvfb):
    out = tmp_path / "runs"
    proc = explorer_process("play", "--dry-run", "--region", "0,0,32,32", "--out", str(out), "--set",
                            "control.countdown_s=600", "--set", "capture.blank_seconds=1000", *SMALL, DISPLAY=xvfb)
    wait_for(lambda: any(out.glob("*/config.toml")), proc, "run directory")  # setting up, or counting down
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 130
    assert last_line(err) == "explorer: stopped by SIGINT before the first tick; nothing was kept"
    assert list(out.iterdir()) == []
