"""Run directories: whole-or-nothing files, one writer at a time, and a resume that changes nothing until told."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from explorer.config import Config, load
from explorer.run import rundir as rd


def temp_files(folder):
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name)


def test_atomic_write_replaces_whole_and_leaves_nothing_when_it_fails(tmp_path, monkeypatch):
    path = tmp_path / "summary.json"
    rd.atomic_write(path, "old\n")
    rd.atomic_write(path, b"new\n")
    assert path.read_bytes() == b"new\n"
    assert temp_files(tmp_path) == []

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(rd.os, "fsync", full)  # the data never reached the disk
    with pytest.raises(OSError, match="No space left"):
        rd.atomic_write(path, "half\n")
    assert path.read_bytes() == b"new\n" and temp_files(tmp_path) == []


def test_atomic_save_hands_a_temporary_path_with_the_suffix_and_renames_it_in(tmp_path):
    seen = []

    def savefig(tmp):  # matplotlib picks the format from the suffix
        seen.append(tmp)
        tmp.write_bytes(b"\x89PNG...")

    path = rd.atomic_save(tmp_path / "trajectory.png", savefig)
    assert path.read_bytes() == b"\x89PNG..."
    assert seen[0].parent == tmp_path and seen[0].suffix == ".png" and seen[0].name.startswith(".trajectory.")
    assert not seen[0].exists()

    def crashes(tmp):
        tmp.write_bytes(b"\x89P")
        raise RuntimeError("renderer died")

    with pytest.raises(RuntimeError, match="renderer died"):
        rd.atomic_save(tmp_path / "trajectory.png", crashes)
    assert path.read_bytes() == b"\x89PNG..." and temp_files(tmp_path) == []


def test_a_new_run_writes_its_config_and_summary(tmp_path):
    config = load(None, ["run.seed=5"])
    with rd.RunDir(tmp_path, "explore", config) as run:
        run.log({"step": 1})
        run.write_summary({"steps": 1})
        assert load(run.path / "config.toml") == config
        assert json.loads((run.path / "summary.json").read_text()) == {"steps": 1}
        assert (run.path / ".lock").read_text() == f"{os.getpid()}\n"
    assert run.path.parent == tmp_path and run.path.name.endswith("-explore")
    second = rd.RunDir(tmp_path, "explore", config)  # same second, same name: a folder of its own
    assert second.path != run.path
    second.close()


def test_a_reopened_run_changes_nothing_until_its_config_is_committed(tmp_path):
    with rd.RunDir(tmp_path, "explore", Config()) as run:
        run.log({"step": 1})
    files = {p.name: p.read_bytes() for p in run.path.iterdir() if p.name != ".lock"}
    stamps = {p.name: p.stat().st_mtime_ns for p in run.path.iterdir() if p.name != ".lock"}
    again = rd.RunDir.reopen(run.path)
    assert {p.name: p.read_bytes() for p in run.path.iterdir() if p.name != ".lock"} == files
    assert {p.name: p.stat().st_mtime_ns for p in run.path.iterdir() if p.name != ".lock"} == stamps
    again.commit_config(load(None, ["run.steps=99"]))
    again.log({"step": 2})
    again.close()
    assert load(run.path / "config.toml").run.steps == 99
    assert (run.path / "metrics.jsonl").read_text().splitlines() == ['{"step": 1}', '{"step": 2}']
    with pytest.raises(rd.RunDirError, match=f"no run directory at {tmp_path / 'gone'}; give the folder"):
        rd.RunDir.reopen(tmp_path / "gone")


def test_a_line_torn_by_a_crash_does_not_swallow_the_next_record(tmp_path):
    with rd.RunDir(tmp_path, "x", None) as run:
        (run.path / "metrics.jsonl").write_text('{"step": 1}\n{"ste')
    with rd.RunDir.reopen(run.path) as again:
        again.log({"step": 2})
    assert (run.path / "metrics.jsonl").read_text().splitlines()[-1] == '{"step": 2}'


def test_a_file_in_the_way_is_a_clear_error(tmp_path):
    (tmp_path / "taken").write_text("")
    with pytest.raises(rd.RunDirError, match=r"run directory .*taken is a file, not a folder"):
        rd.RunDir(tmp_path, "x", None, path=tmp_path / "taken")
    with pytest.raises(rd.RunDirError, match=r"cannot create a run directory in .*taken: it is a file, not a folder; "
                       r"choose another folder \(--out or run.dir\)$"):
        rd.RunDir(tmp_path / "taken", "x", Config())


def test_a_run_in_use_by_another_process_is_refused_and_freed_when_that_process_dies(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    script = textwrap.dedent(f"""
        import time
        from explorer.run.rundir import RunDir
        r = RunDir.reopen({str(run)!r})
        print("locked", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(rd.RunDirError) as err:
            rd.RunDir.reopen(run)
        assert str(err.value) == (f"run {run} is in use by another explorer process (pid {proc.pid}); "
                                  f"wait for it to finish")
    finally:
        proc.send_signal(signal.SIGKILL)  # no clean-up runs: the operating system drops the lock
        proc.wait(15)
    with rd.RunDir.reopen(run) as mine:
        assert mine._lock.held
        with pytest.raises(rd.RunDirError, match="already open for writing in this process"):
            rd.RunDir.reopen(run)
    rd.RunDir.reopen(run).close()  # closed: free again


def test_a_run_dropped_without_close_lets_go_of_its_lock(tmp_path):
    run = rd.RunDir(tmp_path, "x", None)
    path = run.path
    del run
    rd.RunDir.reopen(path).close()


def test_a_new_run_that_wrote_nothing_is_removed_and_one_that_did_stays(tmp_path):
    with pytest.raises(RuntimeError, match="engine failed"), rd.RunDir(tmp_path, "failed", Config()) as failed:
        (failed.path / "tb").mkdir()
        (failed.path / "tb" / "events.out").write_bytes(b"header only")
        (failed.path / "metrics.jsonl").touch()
        raise RuntimeError("engine failed")
    assert not failed.path.exists()
    with rd.RunDir(tmp_path, "stopped", Config()) as stopped:  # stopped before its first step, no exception
        assert stopped.path.is_dir()  # there while open
    assert not stopped.path.exists()
    with rd.RunDir(tmp_path, "logged", Config()) as logged:
        logged.log({"step": 1})
    assert (logged.path / "metrics.jsonl").is_file()
    kept = tmp_path / "kept"
    kept.mkdir()
    with rd.RunDir.reopen(kept) as resumed:  # a run given by path (a resume) is never removed
        assert resumed.path == kept
    assert kept.is_dir()


def test_a_full_disk_is_one_line_naming_the_file_and_leaves_no_new_run(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(rd, "atomic_write", full)
        with pytest.raises(rd.RunDirError) as err:
            rd.RunDir(tmp_path, "explore", Config())
    assert list(tmp_path.iterdir()) == [], "a run that could not write its config is not left behind"
    assert str(err.value).startswith(f"cannot write {tmp_path}/") and str(err.value).endswith(
        "-explore/config.toml: No space left on device; free space there, or choose another folder (--out or run.dir)")
    with rd.RunDir(tmp_path, "explore", Config()) as run:
        run.log({"step": 1})
        monkeypatch.setattr(rd, "atomic_write", full)
        with pytest.raises(rd.RunDirError, match=r"cannot write .*summary.json: No space left on device; the run stops"):
            run.write_summary({"steps": 1})
        monkeypatch.setattr(run._metrics, "write", full)
        with pytest.raises(rd.RunDirError, match=r"cannot write .*metrics.jsonl: No space left on device; the run stops"):
            run.log({"step": 2})
    assert (run.path / "metrics.jsonl").read_text() == '{"step": 1}\n'  # what was written stays


def strict_json(text):
    """JSON as every reader reads it: NaN and Infinity are not JSON."""
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_numbers_that_are_not_finite_are_written_as_null(tmp_path):
    with rd.RunDir(tmp_path, "explore", Config()) as run:
        run.log({"step": 1, "critic_loss": float("nan"), "novelty": [1.0, float("inf")]})
        run.write_summary({"cells_per_budget": float("nan"), "loop": {"hz": float("-inf"), "steps": 3}})
        assert strict_json((run.path / "summary.json").read_text()) == {
            "cells_per_budget": None, "loop": {"hz": None, "steps": 3}}
        assert strict_json((run.path / "metrics.jsonl").read_text()) == {
            "step": 1, "critic_loss": None, "novelty": [1.0, None]}


def test_a_resumed_run_keeps_the_summaries_it_had(tmp_path):
    with rd.RunDir(tmp_path, "replay", Config()) as run:
        run.write_summary({"transitions": 200, "sessions": ["s1"]})
    for steps in (100, 150):  # two resumes of it
        with rd.RunDir.reopen(run.path) as resumed:
            resumed.write_summary({"steps": steps, "resumed_at": 0})
            resumed.write_summary({"steps": steps, "resumed_at": 1})  # a second write of one part replaces it
    assert strict_json((run.path / "summary.json").read_text()) == {
        "steps": 150, "resumed_at": 1, "earlier": [{"transitions": 200, "sessions": ["s1"]},
                                                   {"steps": 100, "resumed_at": 1}]}


def test_a_summary_that_cannot_be_read_is_kept_aside_when_the_run_goes_on(tmp_path):
    with rd.RunDir(tmp_path, "explore", Config()) as run:
        run.log({"step": 1})
    (run.path / "summary.json").write_text('{"steps": 12, "cells')  # cut short
    with rd.RunDir.reopen(run.path) as resumed:
        resumed.write_summary({"steps": 5})
    assert strict_json((run.path / "summary.json").read_text()) == {
        "steps": 5, "earlier": [{"unreadable": "summary-unreadable.json"}]}
    assert (run.path / "summary-unreadable.json").read_text() == '{"steps": 12, "cells'


CRASH = """
import os, signal, sys
from explorer.config import Config
from explorer.run.rundir import RunDir
run = RunDir(sys.argv[1], "explore", Config())
print(run.path, flush=True)
if sys.argv[2] == "crash":
    os.kill(os.getpid(), signal.SIGSEGV)  # as an engine crash takes its controller down: no clean-up runs
sys.stdin.readline()  # "hold": keep the run open until told
"""


def test_a_run_that_crashed_before_writing_anything_leaves_no_run_directory(tmp_path, capfd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    crashed = subprocess.run([sys.executable, "-c", CRASH, str(tmp_path), "crash"], capture_output=True, text=True,
                             env=env)
    assert crashed.returncode == -signal.SIGSEGV
    left = tmp_path / crashed.stdout.strip()
    assert sorted(p.name for p in left.iterdir()) == [".lock", "config.toml"]  # what the crash left
    holding = subprocess.Popen([sys.executable, "-c", CRASH, str(tmp_path), "hold"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=env)
    try:
        starting = tmp_path / holding.stdout.readline().strip()  # a run just started: nothing written yet
        with rd.RunDir(tmp_path, "written", Config()) as written:
            written.log({"step": 1})
        with rd.RunDir(tmp_path, "next", Config()) as run:  # the next run in the folder cleans up
            run.log({"step": 1})
        # removed, by this process or by the run started next, which within the same second may take its name
        assert f"explorer: removed {left}: a run that crashed before it wrote anything left it empty" in capfd.readouterr().err
        assert not left.exists() or left == starting
        assert starting.is_dir() and written.path.is_dir()  # in use, or holding what a run wrote
    finally:
        holding.communicate("\n", timeout=60)
