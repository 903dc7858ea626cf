"""A full disk when a run or a recording starts: one line, and nothing half-made left on the disk.

Each case runs the command line in a process of its own on a real, tiny tmpfs, mounted in a private
mount namespace (``unshare``), so no root is needed and nothing outlives the test.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_safety import SMALL, child_env, last_line


def _can_mount() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--mount", "--map-root-user", "sh", "-c", "mount -t tmpfs tmpfs /mnt"],
                           capture_output=True)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(sys.platform != "linux" or not _can_mount(),
                                reason="needs Linux with unprivileged mount namespaces (unshare -rm)")


def on_tiny_disk(disk: Path, size: str, *args: str) -> tuple[int, str, list[str]]:
    """Run ``explorer ARGS`` with a tmpfs of ``size`` on ``disk``; returns its exit code, stderr and what it
    left on the disk (paths relative to it)."""
    disk.mkdir(exist_ok=True)
    listing = disk.parent / f"{disk.name}.left"
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "explorer.cli", *args])
    script = (f"mount -t tmpfs -o size={size} tmpfs {shlex.quote(str(disk))} || exit 99; {command}; rc=$?; "
              f"(cd {shlex.quote(str(disk))} && find . -mindepth 1) > {shlex.quote(str(listing))}; exit $rc")
    proc = subprocess.run(["unshare", "--mount", "--map-root-user", "sh", "-c", script], capture_output=True,
                          text=True, timeout=600, env=child_env())
    assert proc.returncode != 99, proc.stderr
    return proc.returncode, proc.stderr, listing.read_text().split()


def test_no_room_for_the_run_directory_config(tmp_path):
    disk = tmp_path / "disk"
    rc, err, left = on_tiny_disk(disk, "4k", "explore", "--steps", "100", "--out", str(disk), "--no-progress", *SMALL)
    assert rc == 1 and "Traceback" not in err
    assert last_line(err).startswith(f"explorer: cannot write {disk}/")
    assert last_line(err).endswith("-explore/config.toml: No space left on device; free space there, or choose another "
                                   "folder (--out or run.dir)")
    assert left == []


def test_a_disk_that_fills_before_the_first_checkpoint_leaves_no_half_run(tmp_path):
    disk = tmp_path / "disk"
    rc, err, left = on_tiny_disk(disk, "8k", "explore", "--steps", "100", "--out", str(disk), "--no-progress",
                                 "--set", "run.log_every=10", *SMALL)
    assert rc == 1 and "Traceback" not in err
    line = last_line(err)
    assert line.startswith(f"explorer: could not write the checkpoint of step 10 in {disk}/")
    assert line.endswith(": No space left on device. Each checkpoint holds the replay (up to learner.schedule.replay_mb MiB); "
                         "free space there, or lower learner.schedule.replay_mb. No checkpoint of this run was written before, "
                         "so it cannot be resumed: start it again once there is space")
    assert left == []


def test_no_room_for_the_session_of_a_recorded_run(tmp_path):
    disk = tmp_path / "disk"
    # 8k: two tmpfs pages, room for the session's meta.json (a little over one page with the settings in it)
    # and not for its first chunk
    rc, err, left = on_tiny_disk(disk, "8k", "explore", "--steps", "100", "--out", str(tmp_path / "runs"),
                                 "--record", str(disk), "--no-progress", "--set", "record.chunk_frames=4", *SMALL)
    assert rc == 1 and "Traceback" not in err
    (run,) = (tmp_path / "runs").iterdir()
    # the session could not be kept; the run's checkpoint, written on the way out, is, and named
    assert re.fullmatch(
        rf"explorer: cannot write session {re.escape(str(disk))}/{run.name}: No space left on device; nothing was "
        rf"recorded, so the session folder is not kept; free space there, or record elsewhere \(--out, --record or "
        rf"record.dir\); kept checkpoint {re.escape(str(run))}/checkpoints/learner-\d+ and run directory "
        rf"{re.escape(str(run))}; continue with: explorer explore --resume {re.escape(str(run))}", last_line(err))
    assert left == []


def test_no_room_for_a_recording(tmp_path, xvfb):
    disk = tmp_path / "disk"  # 8k: room for the session's meta.json, not for its first chunk (as above)
    rc, err, left = on_tiny_disk(disk, "8k", "record", "--region", "0,0,32,32", "--seconds", "20", "--out", str(disk),
                                 "--chunk-frames", "4")
    assert rc == 1 and "Traceback" not in err
    line = last_line(err)
    assert line.startswith(f"explorer: cannot write session {disk}/") and line.endswith(
        "-record: No space left on device; nothing was recorded, so the session folder is not kept; free space there, "
        "or record elsewhere (--out, --record or record.dir)")
    assert left == []
