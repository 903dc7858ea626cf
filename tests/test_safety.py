"""Stopping on signals: the first ends the run at a step and keeps what it did; a second stops it at once.

The runs are real processes of the command line, sent real signals.
"""

from __future__ import annotations

import contextlib
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

SMALL = ["--set", "game.episode_steps=50", "--set", "learner.schedule.warmup_steps=20", "--set", "learner.schedule.batch_size=8",
         "--set", "learner.networks.filters=[4]", "--set", "learner.networks.hidden=16", "--set", "learner.networks.feature=16",
         "--set", "learner.schedule.replay_mb=2"]


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
                     "learner.schedule.checkpoint_every=30", *SMALL]) == 1
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


RAY_TINY = ["game.name=synthetic", "game.episode_steps=60", "observation.height=16", "observation.width=16",
            "learner.schedule.batch_size=8", "learner.networks.filters=[4]", "learner.networks.hidden=16", "learner.networks.feature=16",
            "learner.schedule.replay_mb=4", "learner.schedule.warmup_steps=60", "learner.schedule.update_every=2", "novelty.signal=pixel",
            "run.ship_steps=30", "run.log_every=30", "run.worker_cpus=0.5"]


def session_processes(sid: int) -> dict[int, str]:
    """Processes of session ``sid`` that are alive (zombies left out), with their command lines (Linux)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(fields[3]) == sid:
                cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found[int(stat.parent.name)] = cmdline.strip()
        except (OSError, IndexError, ValueError):
            continue  # it ended while being read
    return found


def _interrupt_when_training(proc: subprocess.Popen, out: Path, stderr) -> str:
    """Ctrl-C once the learner of ``proc``'s run has made an update; its stderr once it has stopped and
    every process of its session has ended."""

    def training() -> bool:  # a metric line after the warm-up reports the learner's first updates
        whole = [x for f in out.glob("*/metrics.jsonl") for x in f.read_text().split("\n")[:-1]]  # not one half written
        return any(json.loads(x).get("updates", 0) > 0 for x in whole)

    wait_for(training, proc, "learner update")
    ray_processes = session_processes(proc.pid)
    assert any("raylet" in c for c in ray_processes.values()), ray_processes
    assert sum("RemoteWorker" in c for c in ray_processes.values()) == 2, ray_processes
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it: to the command's process group
    try:
        proc.wait(timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("the run did not stop within 240 s of Ctrl-C")
    # Ray's processes of the run (raylet, GCS, the workers, the learner) end with it
    deadline = time.monotonic() + 240  # a loaded machine gets more time, not a weaker check
    while (left := session_processes(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, left
    stderr.seek(0)
    return stderr.read()


def test_ctrl_c_of_a_multi_worker_run_stops_workers_and_learner_and_keeps_a_checkpoint_to_resume(tmp_path):
    """A terminal's Ctrl-C (SIGINT to the command's process group) while two Ray workers feed the learner."""
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")
    out = tmp_path / "runs"
    sets = [arg for s in RAY_TINY for arg in ("--set", s)]
    with open(tmp_path / "stderr", "w+") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "explorer.cli", "explore", "--workers", "2", "--steps", "100000",
                                 "--out", str(out), "--no-progress", *sets], stdout=subprocess.DEVNULL, stderr=stderr,
                                text=True, env=child_env(), start_new_session=True)  # its own session, as in a terminal
        try:
            err = _interrupt_when_training(proc, out, stderr)
        finally:  # whatever failed, nothing of the run outlives the test
            for pid in session_processes(proc.pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-2000:]
    (run,) = out.iterdir()
    m = re.fullmatch(rf"explorer: stopped by SIGINT at step (\d+) of 100000; kept checkpoint "
                     rf"{re.escape(str(run))}/checkpoints/learner-(\d+) and run directory {re.escape(str(run))}; "
                     rf"continue with: explorer explore --resume {re.escape(str(run))}", last_line(err))
    assert m and m[1] == m[2], last_line(err)
    assert "Traceback" not in err, err[-3000:]  # no worker, learner or coordinator failed on the way out
    step = int(m[1])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["stopped_by"] == "SIGINT" and summary["loop"]["stopped_by"] == "SIGINT"
    assert summary["steps"] == step and sum(w["steps"] for w in summary["workers"]) == step
    assert summary["updates"] > 0 and summary["lost_batches"] == 0
    from explorer.agent.checkpoint import latest_checkpoint
    assert summary["checkpoint"] == latest_checkpoint(run / "checkpoints") == f"{run}/checkpoints/learner-{step}"
    # the checkpoint loads: a resume continues from its step, with its learner's updates
    assert cli.main(["explore", "--resume", str(run), "--steps", str(step + 20), "--workers", "1",
                     "--no-progress"]) == 0
    resumed = json.loads((run / "summary.json").read_text())
    assert resumed["resumed_at"] == step and resumed["steps"] == 20 and resumed["stopped_by"] == "steps"
    assert resumed["updates"] > summary["updates"]
    assert resumed["checkpoint"] == f"{run}/checkpoints/learner-{step + 20}"
