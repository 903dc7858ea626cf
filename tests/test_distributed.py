"""``explore --workers N`` on a small local Ray cluster: two workers feed one learner, a worker killed
mid-run is restarted, and a multi-worker run resumes from its checkpoint with another number of workers."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")

from explorer import cli  # noqa: E402
from explorer.config import load  # noqa: E402
from explorer.run.explore import explore  # noqa: E402

TINY = ["game.name=synthetic", "game.episode_steps=60", "observation.height=16", "observation.width=16",
        "learner.batch_size=8", "learner.filters=[4]", "learner.hidden=16", "learner.feature=16",
        "learner.replay_mb=4", "learner.warmup_steps=60", "learner.publish_every=2", "learner.update_every=2",
        "novelty.signal=pixel", "run.ship_steps=30", "run.log_every=60", "run.worker_cpus=0.5"]


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster with two logical CPUs, no dashboard and a small object store, for this module.

    ray.init installs signal handlers of its own (SIGTERM -> sys.exit); they are taken back afterwards, so
    the tests after this module see the process's handlers as they were.
    """
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=100 * 2**20,
             logging_level="warning", runtime_env={"env_vars": {"TF_CPP_MIN_LOG_LEVEL": "3"}})
    yield
    ray.shutdown()
    for s, handler in handlers.items():
        signal.signal(s, handler)
    assert signal.getsignal(signal.SIGTERM) is handlers[signal.SIGTERM]


STEPS = 900


@pytest.fixture(scope="module")
def two_worker_run(cluster, tmp_path_factory):
    """A run of two workers; worker 1's process is killed once it has delivered a batch.

    Until the restarted worker 1 delivers, each report of worker 0 holds the coordinator for a
    moment, so that worker 0 cannot finish the run alone while worker 1 restarts, however slowly.
    """
    out = tmp_path_factory.mktemp("runs")
    config = load(None, [*TINY, "run.workers=2", f"run.steps={STEPS}", f"run.dir={str(out)!r}"])
    killed: list[int] = []
    reports = []

    def kill_worker_1(report) -> None:
        reports.append(report)
        if report.worker == 1 and report.steps and not killed:
            killed.append(report.pid)
            os.kill(report.pid, signal.SIGKILL)
        back = any(r.worker == 1 and r.steps and r.pid not in killed for r in reports)
        if killed and not back and report.worker == 0:
            time.sleep(0.5)

    summary = explore(config, progress=False, on_report=kill_worker_1)
    return summary, reports, killed


def test_two_workers_feed_one_learner_whose_weights_reach_them(two_worker_run):
    summary, reports, _ = two_worker_run
    assert summary["steps"] == STEPS and summary["loop"]["stopped_by"] == "steps"
    workers = summary["workers"]
    # Transitions from both workers reached replay, and the learner trained on them.
    assert all(w["transitions_in_replay"] > 0 for w in workers), workers
    assert summary["transitions"] == sum(w["transitions_in_replay"] for w in workers)
    assert summary["updates_this_run"] > 0
    # Ratio: one update at the end of the warm-up and one per 2 steps after it, never more.
    assert summary["updates_this_run"] <= (STEPS - 60) // 2 + 1
    # The weights each worker acted with changed over the run (published every 2 updates).
    versions = {w: [r.version for r in reports if r.worker == w and r.steps] for w in (0, 1)}
    assert all(v[-1] > v[0] >= 0 for v in versions.values()), versions
    assert summary["weights_version"] >= max(v[-1] for v in versions.values())


def test_a_killed_worker_is_restarted_and_the_run_reports_the_lost_batch(two_worker_run):
    summary, reports, killed = two_worker_run
    assert len(killed) == 1
    one = summary["workers"][1]
    assert one["restarts"] == 1 and one["lost_batches"] == 1 and one["lost_steps"] > 0 and one["incarnations"] == 2
    assert summary["lost_batches"] == 1 and summary["worker_restarts"] == 1
    after = [r for r in reports if r.worker == 1 and r.pid != killed[0] and r.steps]
    assert after, "the restarted worker delivered nothing"
    # Its lost steps were granted again: the run still took all its steps.
    assert sum(w["steps"] for w in summary["workers"]) == STEPS


def test_a_multi_worker_run_writes_metrics_per_worker_and_a_checkpoint(two_worker_run):
    summary, _, _ = two_worker_run
    run = summary["run_dir"]
    lines = [json.loads(x) for x in Path(run, "metrics.jsonl").read_text().splitlines()]
    episodes = [x for x in lines if "episode" in x]
    assert {x["worker"] for x in episodes} == {0, 1} and all(x["cells"] > 0 for x in episodes)
    # The summary's episodes are every worker's, in the order they ended: its last 20 are the newest
    assert summary["cells_per_episode"] == [x["cells"] for x in episodes]
    assert summary["cells_per_episode_last20"] == pytest.approx(sum(x["cells"] for x in episodes[-20:]) / min(len(episodes), 20))
    periodic = [x for x in lines if "steps_per_s" in x]
    assert periodic and set(periodic[-1]["workers"]) == {"0", "1"} and "update_to_data" in periodic[-1]
    assert os.path.getsize(summary["trajectory_png"]) > 0
    assert summary["checkpoint"].endswith(f"learner-{STEPS}")
    assert any(name.startswith("events") for name in os.listdir(os.path.join(run, "tb")))


def test_a_multi_worker_run_resumes_from_its_checkpoint_with_another_number_of_workers(two_worker_run, capsys):
    first, _, _ = two_worker_run
    code = cli.main(["explore", "--resume", first["run_dir"], "--steps", str(STEPS + 90), "--workers", "3", "--no-progress",
                     "--set", "run.worker_cpus=0.3"])
    assert code == 0, capsys.readouterr().err[-2000:]
    summary = json.loads(Path(first["run_dir"], "summary.json").read_text())
    assert summary["resumed_at"] == STEPS and summary["steps"] == 90 and len(summary["workers"]) == 3
    assert summary["updates"] > first["updates"]  # the learner went on from its checkpoint's count
    assert summary["updates"] <= (STEPS + 90 - 60) // 2 + 1
    assert summary["checkpoint"].endswith(f"learner-{STEPS + 90}")
