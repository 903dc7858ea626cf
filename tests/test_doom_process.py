"""The engine process: tied to its controller, cleaned up after a crash, Ctrl-C and display checks at start-up."""

from __future__ import annotations

import json
import mmap
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from test_full_disk import _can_mount  # unshare and a tmpfs mount, as the full-disk tests need

from explorer.config import load
from explorer.envs import make_game
from explorer.envs.doom import process as doom_process
from explorer.envs.doom.game import GameError

pytest.importorskip("vizdoom")
pytestmark = pytest.mark.skipif(not doom_process.is_linux(), reason="Linux process and /dev/shm behaviour")

ROOT = Path(__file__).resolve().parent.parent
SHM = Path("/dev/shm")
HANG_S = 300.0  # only a guard against a hang: the tests wait for what they check

# Starts the built-in game, reports its engine, then plays until killed.
RUN_GAME = """
import sys
from explorer.envs.doom import process as doom_process
if sys.argv[1] == "direct":  # as if the launcher could not be used
    doom_process.engine_launcher = lambda engine: None
from explorer.config import load
from explorer.envs import make_game
game = make_game(load())
print(game.game.get_instance_id(), flush=True)
while True:
    game.advance()
    if game.episode_ended:
        game.new_episode()
"""


def _start_game(mode: str) -> tuple[subprocess.Popen, psutil.Process, str]:
    """A real explorer process running the game: (the process, its engine, the engine's instance id)."""
    proc = subprocess.Popen([sys.executable, "-c", RUN_GAME, mode], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    ident = proc.stdout.readline().strip()
    assert len(ident) == 10, f"the game did not start (exit code {proc.poll()})"
    (engine,) = [p for p in psutil.Process(proc.pid).children(recursive=True) if p.name() == "vizdoom"]
    return proc, engine, ident


def _files(ident: str) -> list[str]:
    return sorted(p.name for p in SHM.glob(f"ViZDoom*{ident}"))


def test_engine_dies_with_a_killed_run_and_the_next_start_deletes_its_files():
    proc, engine, ident = _start_game("launcher")
    assert engine.environ()[doom_process.OWNER_ENV] == str(proc.pid)
    assert len(_files(ident)) == 3  # screen/state memory and two message queues
    proc.kill()  # SIGKILL: no finally block runs in the game's process
    proc.wait()
    gone, alive = psutil.wait_procs([engine], timeout=HANG_S)
    assert engine in gone, "the engine outlived the process that controlled it"
    left = _files(ident)  # what the killed run leaves behind, unless another explorer run starting on this
    assert len(left) in (0, 3)  # machine meanwhile reaped them (its game start calls reap_leftovers too)
    notes = doom_process.reap_leftovers(min_age_s=0)
    assert _files(ident) == []
    if left:
        assert any("deleted" in n and "ViZDoom shared-memory files" in n for n in notes)


def test_an_orphaned_engine_of_a_dead_run_is_stopped_at_the_next_start():
    proc, engine, ident = _start_game("direct")
    try:
        proc.kill()
        proc.wait()
        time.sleep(0.5)
        assert engine.is_running() and engine.status() != psutil.STATUS_ZOMBIE  # an orphan: nothing stopped it
        assert engine.ppid() != proc.pid
        notes = doom_process.reap_leftovers(min_age_s=0)
        gone, _ = psutil.wait_procs([engine], timeout=HANG_S)
        assert engine in gone
        assert f"stopped ViZDoom engine {engine.pid} left running by explorer process {proc.pid}, which died" in notes
        assert _files(ident) == []
    finally:
        if engine.is_running():
            engine.kill()


def test_files_in_use_are_kept_and_stale_ones_go_at_game_start(tmp_path, capfd):
    stale = SHM / "ViZDoomSMzzTestStal"  # 10-character instance id, as ViZDoom makes them
    mapped = SHM / "ViZDoomSMzzTestMapd"
    named = SHM / "ViZDoomMQCtrzzTestName"
    for path in (stale, mapped, named):
        path.write_bytes(b"\0" * 4096)
        os.utime(path, (time.time() - 60, time.time() - 60))
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "+viz_instance_id", "zzTestName"])
    try:
        with mapped.open("r+b") as f, mmap.mmap(f.fileno(), 4096):
            game = make_game(load())
            game.close()
            assert mapped.exists() and named.exists()
        assert not stale.exists()
        assert "explorer: deleted 1 ViZDoom shared-memory files (0.0 MB) in /dev/shm" in capfd.readouterr().err
    finally:
        holder.kill()
        for path in (stale, mapped, named):
            path.unlink(missing_ok=True)


def test_deferred_sigint_delivers_ctrl_c_after_the_block():
    before = signal.getsignal(signal.SIGINT)
    reached_end = False
    with pytest.raises(KeyboardInterrupt), doom_process.deferred_sigint():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        reached_end = True
    assert reached_end
    assert signal.getsignal(signal.SIGINT) is before


# Starts games over and over; each Ctrl-C sent by the test interrupts one start-up.
START_LOOP = """
import psutil
import explorer.envs.doom.game  # imports TensorFlow, which is not what is interrupted here
from explorer.config import load
from explorer.envs import make_game
import contextlib, time
for attempt in range(100):
    outcome = "started"
    with contextlib.suppress(KeyboardInterrupt):  # the outcome is reported below either way
        try:
            print("start", flush=True)  # inside the block: a Ctrl-C sent at once cannot land before it
            make_game(load()).close()
        except KeyboardInterrupt:
            outcome = "interrupted"
        time.sleep(0.5)  # a Ctrl-C sent after a quick start-up lands here, not in the reporting below
    print(outcome, flush=True)
    engines = [p for p in psutil.Process().children(recursive=True) if p.name() == "vizdoom"]
    print("engines", len(engines), flush=True)
"""


def test_ctrl_c_during_engine_start_up_is_clean():
    """Ctrl-C goes to the whole process group, as a terminal sends it; the engine used to crash the controller."""
    proc = subprocess.Popen([sys.executable, "-c", START_LOOP], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True)
    outcomes = []
    try:
        for delay in (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.13, 0.16, 0.2, 0.25):
            assert proc.stdout.readline() == "start\n", f"exit code {proc.poll()}"
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGINT)
            outcomes.append(proc.stdout.readline().strip())
            assert proc.stdout.readline() == "engines 0\n"
    finally:
        proc.kill()
        proc.wait()
    assert set(outcomes) <= {"started", "interrupted"}
    assert "interrupted" in outcomes


def test_a_visible_game_without_display_is_a_one_line_error(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    with pytest.raises(GameError, match=r"DISPLAY is not set: set DISPLAY .*xvfb-run") as err:
        make_game(load(None, ["game.visible=true"]))
    assert "\n" not in str(err.value)
    monkeypatch.setenv("DISPLAY", ":987")
    with pytest.raises(GameError, match=r"the X server at DISPLAY=':987' does not answer"):
        make_game(load(None, ["game.realtime=true"]))


def test_play_game_without_display_says_so_instead_of_crashing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"} | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "explorer.cli", "play", "--game", "--seconds", "1",
                           "--out", str(tmp_path), "--set", "control.countdown_s=0"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("explorer: game.visible/game.realtime open an engine "
                                                           "window, but DISPLAY is not set")


@pytest.mark.display
def test_display_check_passes_on_a_running_x_server(xvfb):
    assert doom_process.display_problem() is None


# A program using ViZDoom directly (not explorer); argv[1] is the EXPLORER_ENGINE_OWNER it runs with, or "".
PLAIN_VIZDOOM = """
import os, sys, vizdoom
if sys.argv[1]:
    os.environ["EXPLORER_ENGINE_OWNER"] = sys.argv[1]
else:
    os.environ.pop("EXPLORER_ENGINE_OWNER", None)
game = vizdoom.DoomGame()
game.load_config(os.path.join(vizdoom.scenarios_path, "my_way_home.cfg"))
game.set_window_visible(False)
game.init()
print(game.get_instance_id(), flush=True)
sys.stdin.read()
"""


def _plain_game(owner: str) -> tuple[subprocess.Popen, psutil.Process]:
    proc = subprocess.Popen([sys.executable, "-c", PLAIN_VIZDOOM, owner], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert len(proc.stdout.readline().strip()) == 10
    (engine,) = [p for p in psutil.Process(proc.pid).children(recursive=True) if p.name() == "vizdoom"]
    return proc, engine


def test_engines_explorer_did_not_start_or_that_are_still_controlled_are_left_alone():
    # a live program whose engine carries a stale tag (inherited from an explorer process, say)
    live, live_engine = _plain_game(owner=str(os.getpid()))
    # a dead program's engine without the tag: an orphan, but not explorer's
    dead, orphan = _plain_game(owner="")
    try:
        dead.kill()
        dead.wait()
        notes = doom_process.reap_leftovers()
        time.sleep(0.5)
        assert live_engine.is_running() and orphan.is_running()
        assert any(f"ViZDoom engine {orphan.pid} has lost the process that controlled it" in n
                   and f"kill -9 {orphan.pid}" in n for n in notes)
        assert not any(str(live_engine.pid) in n for n in notes)
    finally:
        live.stdin.close()  # the live program closes its engine the ordinary way
        live.wait(10)
        orphan.kill()
        psutil.wait_procs([orphan], timeout=5)
        doom_process.reap_leftovers(min_age_s=0)  # the orphan's files


def test_an_engine_whose_parent_cannot_be_read_is_judged_lost_only_when_init_adopted_it(monkeypatch, tmp_path):
    """From a container or as another user, a live controller's maps cannot be read: that engine is not lost."""
    class Engine:
        def __init__(self, pid: int, ppid: int):
            self.pid = pid
            self.info = {"pid": pid, "ppid": ppid, "name": "vizdoom",
                         "cmdline": ["vizdoom", "+viz_instance_id", f"instance{pid}"]}

    monkeypatch.setattr(psutil, "process_iter", lambda attrs: iter([Engine(101, 555), Engine(102, 1)]))
    monkeypatch.setattr(doom_process, "_maps", lambda pid, path: None)
    monkeypatch.setattr(doom_process, "_owner", lambda proc: None)
    notes = doom_process.reap_leftovers(shm_dir=str(tmp_path))
    assert [n for n in notes if "engine 102 has lost" in n] and not [n for n in notes if "101" in n]


def in_read_only_folder(folder: Path, *command: str) -> subprocess.CompletedProcess:
    """Run ``command`` with its working folder ``folder`` mounted read-only (a private mount namespace)."""
    import shlex
    folder.mkdir(exist_ok=True)
    script = (f"mount -t tmpfs -o ro tmpfs {shlex.quote(str(folder))} || exit 99; cd {shlex.quote(str(folder))} && "
              f"{' '.join(shlex.quote(c) for c in command)}")
    from test_safety import child_env
    proc = subprocess.run(["unshare", "--mount", "--map-root-user", "sh", "-c", script], capture_output=True,
                          text=True, timeout=600, env=child_env())
    assert proc.returncode != 99, proc.stderr
    return proc


needs_mount = pytest.mark.skipif(not _can_mount(), reason="needs unprivileged mount namespaces (unshare -rm)")


@needs_mount
def test_the_game_runs_from_a_read_only_working_folder(tmp_path):
    out = tmp_path / "runs"
    explore = in_read_only_folder(tmp_path / "ro", sys.executable, "-m", "explorer.cli", "explore", "--steps", "20",
                                  "--no-progress", "--out", str(out), "--set", "learner.schedule.warmup_steps=10")
    assert explore.returncode == 0, explore.stderr[-2000:]  # the engine used to crash there (exit code 139)
    (run,) = out.iterdir()
    assert json.loads((run / "summary.json").read_text())["steps"] == 20
    doctor = in_read_only_folder(tmp_path / "ro", sys.executable, "-m", "explorer.cli", "doctor")
    assert doctor.returncode in (0, 1), doctor.stderr[-2000:]  # 1: no display or pad driver here
    assert re.search(r"^ok +built-in game", doctor.stdout, re.M), doctor.stdout


@needs_mount
def test_an_engine_started_without_its_launcher_in_a_read_only_folder_is_a_one_line_error(tmp_path):
    runs = str(tmp_path / "runs")
    code = ("from explorer.envs.doom import process as doom_process\n"
            "doom_process.engine_launcher = lambda engine: None\n"
            "from explorer.cli import main\n"
            f"raise SystemExit(main(['explore', '--steps', '20', '--no-progress', '--out', {runs!r}]))\n")
    proc = in_read_only_folder(tmp_path / "ro", sys.executable, "-c", code)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"explorer: the ViZDoom engine writes _vizdoom.ini and _vizdoom/ into the working folder, and {tmp_path}/ro "
        "is not writable: run explorer from a writable folder")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_new_engine_home_holds_the_folder_the_engine_would_race_to_create(tmp_path, monkeypatch):
    # Two engines starting at once in a new home (--workers, the first run after a reboot) both find no _vizdoom/;
    # the one whose mkdir comes second exits ("Failed to create ./_vizdoom/ directory: File exists"). The
    # launcher makes the folder before any engine starts, and then two engines start together from that home.
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    engine = sys.executable  # any existing file stands for the binary: the launcher only wraps its path
    launcher = doom_process.engine_launcher(engine)
    assert launcher is not None
    folder = tmp_path / f"explorer-{os.getuid()}" / "engine" / "_vizdoom"
    assert folder.is_dir() and folder.stat().st_mode & 0o077 == 0
    assert doom_process.engine_launcher(engine) == launcher  # a second call finds it made and changes nothing
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_RUNTIME_DIR": str(tmp_path)}
    code = "from explorer.config import load\nfrom explorer.envs import make_game\nmake_game(load()).close()\n"
    games = [subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for game in games:
        _, err = game.communicate(timeout=HANG_S)
        assert game.returncode == 0, err[-2000:]
