"""``explore --workers N`` on a small local Ray cluster: two workers feed one learner, a worker killed
mid-run is restarted, and a multi-worker run resumes from its checkpoint with another number of workers."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")

from explorer import cli  # noqa: E402
from explorer.config import load  # noqa: E402
from explorer.run.explore import explore  # noqa: E402

TINY = ["game.name=synthetic", "game.episode_steps=60", "observation.height=16", "observation.width=16",
        "learner.schedule.batch_size=8", "learner.networks.filters=[4]", "learner.networks.hidden=16", "learner.networks.feature=16",
        "learner.schedule.replay_mb=4", "learner.schedule.warmup_steps=60", "learner.schedule.publish_every=2", "learner.schedule.update_every=2",
        "novelty.signal=pixel", "run.ship_steps=30", "run.log_every=60", "run.worker_cpus=0.5"]
NICENESS = "RAY_worker_niceness"  # Ray's setting, spelt as Ray reads it


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster with two logical CPUs, no dashboard and a small object store, for this module.

    ray.init installs signal handlers of its own (SIGTERM -> sys.exit); they are taken back afterwards, so
    the tests after this module see the process's handlers as they were.
    """
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    # Ray runs its workers at niceness 15 by default: on a machine busy with other work they would get a few per
    # cent of a core, and a worker's restart (a new process, TensorFlow imported again) would take many minutes.
    niceness = os.environ.get(NICENESS)
    os.environ[NICENESS] = "0"
    for attempt in range(5):  # Ray gives up on a node that takes 30 s to register, as it may on a busy machine
        try:
            ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=100 * 2**20,
                     logging_level="warning", runtime_env={"env_vars": {"TF_CPP_MIN_LOG_LEVEL": "3"}})
            break
        except Exception as err:
            ray.shutdown()
            if "timed out during startup" not in str(err) or attempt == 4:
                raise
    if niceness is None:
        os.environ.pop(NICENESS)
    else:
        os.environ[NICENESS] = niceness
    yield
    ray.shutdown()
    for s, handler in handlers.items():
        signal.signal(s, handler)
    assert signal.getsignal(signal.SIGTERM) is handlers[signal.SIGTERM]


STEPS = 900
HANG_S = 300.0  # only a guard against a hang (a worker held, and no report for this long): the run waits on events


class Holds:
    """Makes a two-worker run show what the tests check before its step budget runs out, on any machine.

    Worker 1's process is killed once it has delivered a batch. A worker counts as done once it has
    delivered a batch acted with newer weights than its first and ended an episode (worker 1: and, after
    its restart, delivered a batch from its new process). A worker that is done while the other is not
    is held (its process stopped with SIGSTOP) until the other is done too, so neither can take the whole
    budget alone, however slowly the other starts, restarts or gets its weights. After ``HANG_S`` seconds
    held without a report, every worker is let go, and ``unmet`` says what the run did not show.
    """

    def __init__(self) -> None:
        self.reports: list = []
        self.killed: list[int] = []
        self.first: dict[int, int] = {}
        self.newer: set[int] = set()
        self.ended: set[int] = set()
        self.back = False  # the restarted worker 1 delivered
        self.held: dict[int, int] = {}  # worker -> pid, stopped
        self.lock = threading.Lock()
        self.gave_up = False
        self.last = time.monotonic()
        self.finished = threading.Event()
        self.watch = threading.Thread(target=self._watch, name="holds-watch", daemon=True)

    def _watch(self) -> None:
        while not self.finished.wait(1.0):
            if self.held and time.monotonic() - self.last > HANG_S:
                self.give_up()
                return

    def done(self, worker: int) -> bool:
        return worker in self.newer and worker in self.ended and (worker == 0 or self.back)

    def __call__(self, report) -> None:
        self.reports.append(report)
        self.last = time.monotonic()
        if not report.steps:
            return
        w = report.worker
        first = self.first.setdefault(w, report.version)
        if report.version > first:
            self.newer.add(w)
        if report.ends:
            self.ended.add(w)
        if w == 1 and self.killed and report.pid not in self.killed:
            self.back = True
        if w == 1 and not self.killed:
            self.killed.append(report.pid)
            os.kill(report.pid, signal.SIGKILL)
        with self.lock:
            if self.gave_up or not self.done(w):
                return
            if self.done(1 - w):
                self._release()
            elif w not in self.held:
                self.held[w] = report.pid
                os.kill(report.pid, signal.SIGSTOP)

    def _release(self) -> None:
        for pid in self.held.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.held.clear()

    def give_up(self) -> None:
        with self.lock:
            self.gave_up = True
            self._release()

    @property
    def unmet(self) -> list[str]:
        out = [f"worker {w} acting with newer weights than its first" for w in (0, 1) if w not in self.newer]
        out += [f"worker {w} ending an episode" for w in (0, 1) if w not in self.ended]
        out += [] if self.back else ["a batch from the restarted worker 1"]
        return out


@pytest.fixture(scope="module")
def two_worker_run(cluster, tmp_path_factory):
    """A run of two workers, worker 1's process killed once it has delivered a batch (see :class:`Holds`).

    ``learner.schedule.lag_steps`` is small: the workers wait for the learner to keep its update-to-data ratio, so
    the weights change with the steps however slowly the learner trains.
    """
    out = tmp_path_factory.mktemp("runs")
    config = load(None, [*TINY, "run.workers=2", f"run.steps={STEPS}", "learner.schedule.lag_steps=4", f"run.dir={str(out)!r}"])
    holds = Holds()
    holds.watch.start()
    try:
        summary = explore(config, progress=False, on_report=holds)
    finally:
        holds.finished.set()
        holds.give_up()
    return summary, holds


def waited(holds: Holds) -> str:
    return f"the run ended (or was held {HANG_S:.0f} s without a report) before it showed: {', '.join(holds.unmet)}"


def test_two_workers_feed_one_learner_whose_weights_reach_them(two_worker_run):
    summary, holds = two_worker_run
    assert not holds.unmet, waited(holds)
    assert summary["steps"] == STEPS and summary["loop"]["stopped_by"] == "steps"
    workers = summary["workers"]
    # Transitions from both workers reached replay, and the learner trained on them.
    assert all(w["transitions_in_replay"] > 0 for w in workers), workers
    assert summary["transitions"] == sum(w["transitions_in_replay"] for w in workers)
    assert summary["updates_this_run"] > 0
    # Ratio: one update at the end of the warm-up and one per 2 steps after it, never more.
    assert summary["updates_this_run"] <= (STEPS - 60) // 2 + 1
    # The weights each worker acted with changed over the run (published every 2 updates).
    versions = {w: [r.version for r in holds.reports if r.worker == w and r.steps] for w in (0, 1)}
    assert all(v[-1] > v[0] >= 0 for v in versions.values()), versions
    assert summary["weights_version"] >= max(v[-1] for v in versions.values())


def test_a_killed_worker_is_restarted_and_the_run_reports_the_lost_batch(two_worker_run):
    summary, holds = two_worker_run
    assert not holds.unmet, waited(holds)
    killed = holds.killed
    assert len(killed) == 1
    one = summary["workers"][1]
    assert one["restarts"] == 1 and one["lost_batches"] == 1 and one["lost_steps"] > 0 and one["incarnations"] == 2
    assert summary["lost_batches"] == 1 and summary["worker_restarts"] == 1
    after = [r for r in holds.reports if r.worker == 1 and r.pid != killed[0] and r.steps]
    assert after, "the restarted worker delivered nothing"
    # Its lost steps were granted again: the run still took all its steps.
    assert sum(w["steps"] for w in summary["workers"]) == STEPS


def test_a_multi_worker_run_writes_metrics_per_worker_and_a_checkpoint(two_worker_run):
    summary, holds = two_worker_run
    assert not holds.unmet, waited(holds)
    run = summary["run_dir"]
    lines = [json.loads(x) for x in Path(run, "metrics.jsonl").read_text().splitlines()]
    episodes = [x for x in lines if "episode" in x]
    assert {x["worker"] for x in episodes} == {0, 1} and all(x["cells"] > 0 for x in episodes)
    # The summary's episodes are every worker's, in the order they ended: its last 20 are the newest
    assert summary["cells_per_episode"] == [x["cells"] for x in episodes]
    # and its figure is theirs: cells per 60-step episode budget over the last 20, each counted with its steps
    lengths = summary["episode_lengths"]
    assert len(lengths) == len(episodes) and summary["episode_budget"] == 60
    assert summary["workers"][0]["episode_lengths"] == [60] * summary["workers"][0]["episodes"]  # never restarted
    assert summary["cells_per_budget"] == pytest.approx(sum(x["cells"] for x in episodes[-20:]) / sum(lengths[-20:]) * 60)
    periodic = [x for x in lines if "steps_per_s" in x]
    assert periodic and set(periodic[-1]["workers"]) == {"0", "1"} and "update_to_data" in periodic[-1]
    assert os.path.getsize(summary["trajectory_png"]) > 0
    assert summary["checkpoint"].endswith(f"learner-{STEPS}")
    assert any(name.startswith("events") for name in os.listdir(os.path.join(run, "tb")))


def test_a_multi_worker_run_resumes_from_its_checkpoint_with_another_number_of_workers(two_worker_run, capsys):
    first, _ = two_worker_run
    # Batches of 10 steps: the learner keeps its ratio (learner.schedule.lag_steps) between grants, so it trains on
    # this session's data before the run ends, however slowly
    code = cli.main(["explore", "--resume", first["run_dir"], "--steps", str(STEPS + 90), "--workers", "3", "--no-progress",
                     "--set", "run.worker_cpus=0.3", "--set", "run.ship_steps=10"])
    assert code == 0, capsys.readouterr().err[-2000:]
    summary = json.loads(Path(first["run_dir"], "summary.json").read_text())
    assert summary["resumed_at"] == STEPS and summary["steps"] == 90 and len(summary["workers"]) == 3
    assert summary["updates"] > first["updates"]  # the learner went on from its checkpoint's count
    assert summary["updates"] <= (STEPS + 90 - 60) // 2 + 1
    assert summary["checkpoint"].endswith(f"learner-{STEPS + 90}")


GYM = [*(s for s in TINY if not s.startswith("game.")), "game.name=gym", "game.episode_steps=30", "run.steps=240"]
FRAME_CELLS = "frame cells (Go-Explore's 11x8, 8 grey levels: the game reports no position)"


@pytest.mark.parametrize(("module", "game", "cells"), [
    ("minigrid", "MiniGrid-MultiRoom-N2-S4-v0", "squares"),
    ("ale_py", "ALE/MontezumaRevenge-v5", "rooms"),
    ("ale_py", "ALE/Pong-v5", "frames"),
])
def test_a_gymnasium_game_runs_on_two_workers_measured_as_a_single_process_run_is(cluster, tmp_path, capsys, module,
                                                                                  game, cells):
    """Each worker makes the game (its module imported in the worker's process) and reports what one process
    counts: MiniGrid's grid squares (1-square cells), Montezuma's rooms, Pong's frame cells (it reports no
    position), labelled. Every worker delivers: the first grants (a batch each, run.ship_steps =
    game.episode_steps) are its own, however slowly it starts."""
    pytest.importorskip(module)
    out = tmp_path / "runs"
    code = cli.main(["explore", "--out", str(out), "--no-progress",
                     *(a for s in [*GYM, f"game.id={game}", "run.workers=2"] for a in ("--set", s))])
    assert code == 0, capsys.readouterr().err[-2000:]
    (run,) = out.iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["run_dir"] == str(run) and summary["steps"] == 240 and summary["stopped_by"] == "steps"
    workers = summary["workers"]
    assert [w["worker"] for w in workers] == [0, 1] and sum(w["steps"] for w in workers) == 240
    assert all(w["steps"] >= 30 and w["episodes"] >= 1 and w["distinct_cells"] >= 1 for w in workers), workers
    assert summary["cells"] == (FRAME_CELLS if cells == "frames" else "map cells")
    assert summary["distinct_cells"] >= max(w["distinct_cells"] for w in workers)
    if cells == "rooms":  # a cell is a 16-pixel square of a room: room 1 at least, where the game starts
        assert summary["distinct_rooms"] >= 1 and all(w["distinct_rooms"] >= 1 for w in workers), workers
    elif cells == "squares":  # a cell is one grid square (64 map units would put the whole maze in one)
        assert summary["distinct_cells"] >= 2 and summary["distinct_rooms"] is None
    else:  # the pictures change as the paddles and the ball move: more than one coarse picture
        assert summary["distinct_cells"] >= 2 and summary["distinct_rooms"] is None
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    episodes = [x for x in lines if "episode" in x]
    assert {x["worker"] for x in episodes} == {0, 1} and summary["cells_per_episode"] == [x["cells"] for x in episodes]
    # each episode's line says what its cells are where they are not map cells, as one process logs them
    assert all(x.get("cells_are") == (FRAME_CELLS if cells == "frames" else None) for x in episodes)
    assert Path(summary["trajectory_png"]) == run / "trajectory.png" and (run / "trajectory.png").stat().st_size > 1000
    assert summary["checkpoint"].endswith("learner-240") and summary["updates"] > 0


def test_a_gymnasium_game_that_cannot_be_made_is_one_line_before_a_cluster_starts(tmp_path, capsys, monkeypatch):
    from explorer.run import distributed

    def no_cluster(config):
        pytest.fail("a cluster was joined for a game that cannot be made")

    monkeypatch.setattr(distributed, "Cluster", no_cluster)
    out = tmp_path / "runs"
    code = cli.main(["explore", "--out", str(out), "--no-progress",
                     *(a for s in [*GYM, "game.id=Foo/Bar-v0", "game.module=no_such_module", "run.workers=2"]
                       for a in ("--set", s))])
    assert code == 1
    assert capsys.readouterr().err == ("explorer: game.module = no_such_module cannot be imported (No module named "
                                       "'no_such_module'), so game.id = Foo/Bar-v0 is not registered: pip install -e "
                                       "'.[gym]' (ale-py, minigrid), or install the package that registers it\n")
    assert not out.exists() or list(out.iterdir()) == []


def test_the_trained_recurrent_core_runs_on_two_workers_and_resumes_on_one(cluster, tmp_path, capsys):
    """learner.networks.recurrent_units on workers: each worker's actor fills the core's window and moves its
    stored state on with the weights the learner publishes (what reaches replay says so), and the run resumes
    from its checkpoint on one worker."""
    units, window = 8, 4
    core = [f"learner.networks.recurrent_units={units}", f"learner.networks.recurrent_window={window}"]
    out = tmp_path / "runs"
    code = cli.main(["explore", "--out", str(out), "--no-progress",
                     *(a for s in [*TINY, *core, "run.workers=2", "run.steps=360"] for a in ("--set", s))])
    assert code == 0, capsys.readouterr().err[-2000:]
    (run,) = out.iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 360 and summary["updates"] > 0
    assert all(w["transitions_in_replay"] > 0 for w in summary["workers"]), summary["workers"]
    (replay,) = run.glob("checkpoints/*/replay/replay.npz")
    with np.load(replay) as saved:
        ctx = saved["ctx"]
    # the context's last segment: window x 24 inputs, the window's flags, the stored state
    state = ctx[:, -units:]
    flags = ctx[:, -units - window:-units]
    assert (np.diff(flags, axis=1) >= 0).all() and (flags.sum(1) == window).mean() > 0.5  # 0s then 1s; mostly full
    assert np.abs(state).max() > 0  # steps left the window and moved the stored state on
    assert (state[flags.sum(1) < window] == 0).all()  # a window not yet full has no stored state: episode start
    code = cli.main(["explore", "--resume", str(run), "--steps", "450", "--workers", "1", "--no-progress"])
    assert code == 0, capsys.readouterr().err[-2000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_at"] == 360 and summary["steps"] == 90 and summary["updates"] > 0
