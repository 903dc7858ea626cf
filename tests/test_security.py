"""Files from elsewhere grant themselves nothing: a run directory's engine arguments, scenario file and
places outside the run are refused or not taken, a session's name stays a file name, and a local Ray
cluster listens on this machine only (docs/security.md)."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import tomli_w

from explorer import cli
from explorer.config import Config, ConfigError, load
from explorer.core import ExplorerError
from explorer.testing.fakes import FakeScreen

REPO = Path(__file__).resolve().parents[1]


def _run_dir(tmp_path: Path, tree: dict) -> Path:
    run = tmp_path / "their-run"
    run.mkdir()
    (run / "config.toml").write_text(tomli_w.dumps(tree))
    return run


# ---------------------------------------------------------------- engine arguments

def _hostile_args(target: Path) -> list[list[str]]:
    return [
        [f"+logfile {target}", "+echo ssh-ed25519 AAAAC3Nza planted"],
        ["+logfile", str(target)],
        [f"+exec {target}"],
        [f"-file {target}"],
        ["-iwad", str(target)],
        [f"-config {target}"],
        [f"-record {target}"],
        ["+map MAP01"],
        ["-host 2"],
        ["-join 127.0.0.1"],
        ["+vid_fps 1"],
        [str(target)],  # a bare word: the engine loads it as a file
        ["-nomonsters", f"+sv_cheats 1;logfile {target}"],
        [f"-nomonsters\t+logfile {target}"],
        ["+sv_cheats", "1;logfile"],
        ["-skill 9"],
    ]


@pytest.mark.parametrize("case", range(len(_hostile_args(Path("x")))))
def test_a_resumed_run_whose_config_passes_engine_commands_is_refused_and_nothing_is_written(case, tmp_path, capsys):
    target = tmp_path / "planted"
    args = _hostile_args(target)[case]
    run = _run_dir(tmp_path, {"game": {"args": args, "episode_steps": 5}, "run": {"steps": 10}})
    code = cli.main(["explore", "--resume", str(run), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"explorer: invalid configuration: game.args (from {run / 'config.toml'}): engine argument ")
    assert "game.args takes only -nomonsters" in err
    assert not target.exists() and sorted(p.name for p in run.iterdir()) == ["config.toml"]


def test_game_args_take_the_game_rules_on_the_allow_list():
    config = load(None, ["game.args=['-nomonsters', '-FAST', '-skill 4', '+sv_cheats 1', '-respawn']"])
    assert config.game.args == ("-nomonsters", "-FAST", "-skill 4", "+sv_cheats 1", "-respawn")
    from explorer.config import engine_args
    assert engine_args(config.game.args) == [("-nomonsters",), ("-fast",), ("-skill", "4"), ("+sv_cheats", "1"),
                                             ("-respawn",)]
    with pytest.raises(ConfigError, match=r"engine argument '-skill' takes a whole number from 1 to 5 after it"):
        load(None, ["game.args=['-skill']"])


@pytest.mark.parametrize("name", ["MAP01 +logfile x", "../x", "E1M1;quit", "TOOLONGNAME"])
def test_game_map_is_a_maps_name(name):
    with pytest.raises(ConfigError, match="game.map takes a map's name"):
        load(None, [f"game.map={name!r}"])


# ---------------------------------------------------------------- scenario files

def _marker_engine(tmp_path: Path) -> tuple[Path, Path]:
    """A program that, run as the engine, leaves a file behind."""
    marker = tmp_path / "engine-ran"
    program = tmp_path / "evil-engine"
    program.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    program.chmod(0o755)
    return program, marker


@pytest.mark.parametrize("line, why", [
    ("vizdoom_path = evil-engine", "it names the program started as the engine"),  # paths beside the file
    ("VizDoomPath=evil-engine", "it names the program started as the engine"),
    ("doom_config_path = written.ini", "it names a file the engine reads its settings from and writes them back to"),
    ("game_args += +logfile {ini}", "engine argument '+logfile' is refused"),
    ("game_args = -nomonsters -file {ini}", "engine argument '-file' is refused"),
    ("doom_map = map01 +exec {ini}", "is not a map's name"),
])
def test_a_scenario_file_cannot_name_the_engine_program_its_settings_file_or_engine_commands(tmp_path, line, why):
    vizdoom = pytest.importorskip("vizdoom")
    from explorer.envs import make_game
    from explorer.envs.doom.game import GameError

    _, marker = _marker_engine(tmp_path)
    ini = tmp_path / "written.ini"
    scenario = tmp_path / "their.cfg"
    bundled = Path(vizdoom.scenarios_path) / "my_way_home.cfg"
    (tmp_path / "my_way_home.wad").write_bytes(bundled.with_suffix(".wad").read_bytes())
    scenario.write_text(bundled.read_text() + "\n" + line.format(ini=ini) + "\n")
    with pytest.raises(GameError, match="line ") as err:
        game = make_game(load(None, [f"game.scenario={str(scenario)!r}"]))
        game.close()
    assert why in str(err.value) and "\n" not in str(err.value)
    assert not marker.exists() and not ini.exists()


@pytest.mark.parametrize("line", ["some_new_key = x", "vizdoom path = x", "V_I_Z_DOOM_PATH = x", "doom_config_path+=x"])
def test_a_scenario_setting_off_the_list_is_refused_whatever_its_spelling(tmp_path, line):
    pytest.importorskip("vizdoom")
    from explorer.envs.doom.game import GameError, check_scenario_file

    scenario = tmp_path / "their.cfg"
    scenario.write_text(f"# a scenario\ndoom_skill = 3\n{line}\n")
    with pytest.raises(GameError, match=rf"^game.scenario = '{scenario}', line 3 \(.*\) is refused: it "):
        check_scenario_file(str(scenario))


def test_every_bundled_scenario_passes_the_scenario_check():
    vizdoom = pytest.importorskip("vizdoom")
    from explorer.envs.doom.game import OWN_SCENARIOS, check_scenario_file

    files = [*Path(vizdoom.scenarios_path).glob("*.cfg"), *OWN_SCENARIOS.glob("*.cfg")]
    assert len(files) > 10
    for path in files:
        check_scenario_file(str(path))


def test_a_scenario_name_is_not_a_path(tmp_path):
    pytest.importorskip("vizdoom")
    from explorer.envs import make_game
    from explorer.envs.doom.game import GameError

    with pytest.raises(GameError, match="neither a bundled scenario's name nor a .cfg path"):
        make_game(load(None, [f"game.scenario={str(tmp_path / 'x')!r}"]))


# ---------------------------------------------------------------- places outside the run

def test_a_resumed_run_does_not_take_its_record_folder_or_cluster_from_its_own_file(tmp_path, monkeypatch, capsys):
    import explorer.run.explore

    elsewhere = tmp_path / "elsewhere"
    run = _run_dir(tmp_path, {"record": {"dir": str(elsewhere)}, "run": {"address": "192.0.2.9:6379", "seed": 7},
                              "game": {"module": "antigravity", "kwargs": {"log_file": "/tmp/x", "n": 2}},
                              "control": {"watchdog_ticks": 1000, "countdown_s": 0.0, "stop_key": "x"}})
    seen = []

    def explore(config, progress=True, run_path=None):
        seen.append(config)
        raise ExplorerError("stopped here")

    monkeypatch.setattr(explorer.run.explore, "explore", explore)
    assert cli.main(["explore", "--resume", str(run)]) == 1
    (config,) = seen
    assert config.record.dir == "" and config.run.address == "" and config.game.module == "" and config.run.seed == 7
    assert dict(config.game.kwargs) == {}
    defaults = Config().control  # the pad's safety is the person's at the pad, not the file's to loosen
    assert (config.control.watchdog_ticks, config.control.countdown_s, config.control.stop_key) == (
        defaults.watchdog_ticks, defaults.countdown_s, defaults.stop_key)
    err = capsys.readouterr().err
    assert f"{run / 'config.toml'} sets record.dir = '{elsewhere}', which a run's own file does not choose" in err
    assert "sets run.address = '192.0.2.9:6379'" in err and "--set run.address=" in err
    assert "sets game.module = 'antigravity'" in err
    assert """--set 'game.kwargs={"log_file" = "/tmp/x", "n" = 2}'""" in err
    assert "sets control.watchdog_ticks = 1000" in err and "--set control.watchdog_ticks=" in err
    # given on the command line, they are taken
    record = tmp_path / "mine"
    assert cli.main(["explore", "--resume", str(run), "--record", str(record), "--address", "192.0.2.7:6379"]) == 1
    assert seen[1].record.dir == str(record) and seen[1].run.address == "192.0.2.7:6379"
    assert "sets record.dir" not in capsys.readouterr().err


def test_an_evaluation_is_written_where_the_command_line_says_not_where_the_evaluated_run_says(tmp_path, monkeypatch,
                                                                                               capsys):
    import explorer.run.replay

    elsewhere = tmp_path / "elsewhere"
    run = _run_dir(tmp_path, {"run": {"dir": str(elsewhere)}})
    monkeypatch.setattr(explorer.run.replay, "find_sessions", lambda paths: [Path(p) for p in paths])
    monkeypatch.setattr(explorer.run.replay, "open_sessions", lambda paths: [])
    where = []

    def evaluate(config, sessions, checkpoint, run_path):
        where.append(run_path)
        raise ExplorerError("stopped here")

    monkeypatch.setattr(explorer.run.replay, "evaluate", evaluate)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["replay", "some-session", "--evaluate", str(run)]) == 1
    assert where[0].parent == Path("runs") and not elsewhere.exists()
    assert "sets run.dir" not in capsys.readouterr().err  # the run directory's place is not worth a line


# ---------------------------------------------------------------- session names

@pytest.mark.parametrize("name", ["/../../../escaped", "../escaped", "a/b", "a\\b", "", " ", ".", "..", "C:escaped",
                                  "x\0y", "x\ny", "x" * 101])
def test_a_record_name_becomes_a_file_name_only(tmp_path, name):
    from explorer.config import Config
    from explorer.run.record import record_screen

    out = tmp_path / "a" / "b" / "out"
    stop = threading.Event()
    stop.set()
    with pytest.raises(ExplorerError, match=r"^--name .* cannot name a session folder: .*; give a plain name") as err:
        record_screen(Config(), out, seconds=0.2, hz=20, screen=FakeScreen([np.zeros((8, 8, 1), np.uint8)]),
                      stop=stop, name=name)
    assert "\n" not in str(err.value)
    assert list(tmp_path.rglob("*")) == []


def test_a_plain_record_name_names_the_session_folder(tmp_path):
    from explorer.config import Config
    from explorer.run.record import record_screen

    summary = record_screen(Config(), tmp_path, seconds=0.2, hz=20, screen=FakeScreen.counting((8, 8, 1)),
                            name="e1m1 run.2")
    assert Path(summary["path"]).parent == tmp_path and Path(summary["path"]).name.endswith("-e1m1 run.2")


# ---------------------------------------------------------------- nothing is unpickled

def test_nothing_in_explorer_unpickles_or_evaluates_what_it_reads():
    """Sessions and checkpoints are read as data; a pickle (or eval) would run whatever a file holds."""
    sources = {p: p.read_text(encoding="utf-8") for p in (REPO / "explorer").rglob("*.py")}
    assert len(sources) > 30
    banned = re.compile(r"\bimport (c?pickle|dill|joblib|marshal|shelve)\b|\bpickle\.|allow_pickle\s*=\s*True|"
                        r"torch\.load|yaml\.load\(|\beval\(|\bexec\(|load_model\(")
    for path, text in sources.items():
        assert not banned.search(text), path
        for call in re.finditer(r"\bnp\.load\(([^)]*)\)", text):
            assert "allow_pickle=False" in call.group(1), (path, call.group())


# ---------------------------------------------------------------- Ray

TINY = ["game.name=synthetic", "game.episode_steps=60", "observation.height=16", "observation.width=16",
        "learner.schedule.batch_size=8", "learner.networks.filters=[4]", "learner.networks.hidden=16", "learner.networks.feature=16",
        "learner.schedule.replay_mb=4", "novelty.signal=pixel", "run.worker_cpus=0.5", "run.workers=2"]

LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


@pytest.mark.slow
def test_a_local_cluster_listens_on_loopback_only_and_keeps_its_files_private():
    ray = pytest.importorskip("ray")
    psutil = pytest.importorskip("psutil")
    from explorer.run.distributed import Cluster

    if ray.is_initialized():
        pytest.skip("Ray is connected already in this process")
    cluster = Cluster(load(None, TINY))
    try:
        @ray.remote(num_cpus=0.5)
        class Probe:
            def pid(self) -> int:
                return os.getpid()

        worker = ray.get(Probe.remote().pid.remote())
        me = psutil.Process()
        processes = {p.pid: p for p in [me, *me.children(recursive=True)]}
        processes.setdefault(worker, psutil.Process(worker))
        def listens(p):  # a helper process that ends while it is read listens on nothing
            try:
                return {(p.name(), c.laddr.ip) for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}
            except psutil.NoSuchProcess:
                return set()

        listening = set().union(*(listens(p) for p in processes.values()))
        names = {name for name, _ in listening}
        assert {"gcs_server", "raylet"} <= names and len(names) >= 3, listening
        assert {ip for _, ip in listening} <= LOOPBACK, listening
        temp = Path(cluster.temp_dir)
        assert stat.S_IMODE(temp.stat().st_mode) == 0o700
        session = Path(ray._private.worker._global_node.get_session_dir_path())
        assert session.is_relative_to(temp)
    finally:
        cluster.close()
    assert not temp.exists() and not ray.is_initialized()


def _explore_at(address: str, tmp_path: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "explorer.cli", "explore", "--workers", "2", "--address", address, "--steps", "10",
               "--out", str(tmp_path), "--no-progress", *(a for s in TINY for a in ("--set", s))]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
    try:
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail(f"explore --address {address} was still trying after 90 s")


@pytest.mark.slow
def test_a_wrong_cluster_address_fails_at_once_with_one_line_naming_it(tmp_path):
    pytest.importorskip("ray")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    refused = f"127.0.0.1:{closed.getsockname()[1]}"
    closed.close()  # nothing listens there now
    silent = socket.socket()  # takes connections and says nothing, as a firewall or another program may
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    quiet = f"127.0.0.1:{silent.getsockname()[1]}"
    try:
        for address, why in ((refused, "Connection refused"), (quiet, "it did not answer within 5 s"),
                             ("no-port-here", "is not a Ray cluster's address")):
            done = _explore_at(address, tmp_path)
            last = done.stderr.strip().splitlines()[-1]
            assert done.returncode == 1 and address in last and why in last, done.stderr
            assert last.startswith("explorer: ")
    finally:
        silent.close()
    assert list(tmp_path.iterdir()) == []


def test_the_skill_flag_reaches_the_engine_as_vizdooms_skill():
    pytest.importorskip("vizdoom")
    from explorer.envs import make_game

    game = make_game(load(None, ["game.args=['-skill 2', '-nomonsters']"]))
    try:
        assert game.game.get_doom_skill() == 2 and "-nomonsters" in game.game.get_game_args().split()
        assert "-skill" not in game.game.get_game_args().split()
    finally:
        game.close()
