"""The parts of ``explore --workers N`` that need no Ray: the synthetic game, the outbox and its
merge into replay, a worker and the learner service in one process, and the missing-Ray error."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from explorer import cli
from explorer.agent.adder import NStepAdder
from explorer.agent.outbox import Outbox
from explorer.agent.replay import Replay
from explorer.config import load
from explorer.core import stack_frames
from explorer.envs.synthetic import SyntheticEnv
from explorer.run.workers import LearnerService, Worker, reach_back

TINY = ["game.name=synthetic", "observation.height=16", "observation.width=16", "learner.schedule.batch_size=8",
        "learner.networks.filters=[4]", "learner.networks.hidden=16", "learner.networks.feature=16", "learner.schedule.replay_mb=4",
        "novelty.signal=pixel"]


def tiny(*more: str):
    return load(None, [*TINY, *more])


# ---------------------------------------------------------------- the synthetic game

def test_synthetic_game_walks_turns_and_ends_its_episodes():
    config = tiny("game.episode_steps=5")
    env = SyntheticEnv(config.game, config.observation, stack=2, ring_capacity=8)
    first = env.reset()
    p0 = first.info["position"]
    assert first.first and first.obs.shape == (2, 16, 16, 3) and first.obs.dtype.name == "uint8"
    still = env.step(np.zeros(4, np.float32))
    assert (still.info["position"].x, still.info["position"].y) == (p0.x, p0.y)
    np.testing.assert_array_equal(still.obs[-1].numpy(), first.obs[-1].numpy())  # nothing moved, same picture
    turned = env.step(np.array([1, 0, 0, 0], np.float32))
    assert turned.info["position"].angle == pytest.approx((p0.angle - 10.0 * 4) % 360)
    walked = [env.step(np.array([0, 0, 0, 1], np.float32)) for _ in range(3)]
    p = walked[-1].info["position"]
    assert np.hypot(p.x - p0.x, p.y - p0.y) > 0  # forward moves the player
    assert [s.last for s in walked] == [False, False, True] and env.outcome == "timeout"
    assert not np.array_equal(walked[-1].obs[-1].numpy(), turned.obs[-1].numpy())


def test_synthetic_game_keeps_the_player_inside_its_walls():
    config = tiny("game.episode_steps=500")
    env = SyntheticEnv(config.game, config.observation, stack=1, ring_capacity=4, cells=4)
    env.reset()
    for _ in range(300):
        p = env.step(np.array([0, 0, 0, 1], np.float32)).info["position"]
        assert 0 < p.x < env.size and 0 < p.y < env.size


# ---------------------------------------------------------------- outbox -> replay

def _walk(adder: NStepAdder, rng: np.random.Generator, steps: int, k: int, on_step=None):
    """Feed ``adder`` a stream of episodes of random frames, as a learning actor does."""
    t = 0
    while t < steps:
        obs = rng.integers(0, 256, (k, 4, 4, 1), dtype=np.uint8)
        length = int(rng.integers(3, 12))
        for i in range(length):
            frame = rng.integers(0, 256, (4, 4, 1), dtype=np.uint8)
            adder.add(obs if i == 0 else None, rng.uniform(-1, 1, 4).astype(np.float32), float(rng.uniform()), frame,
                      first=i == 0, last=i == length - 1, starts=bool(rng.integers(0, 2)) or i == 0, ends=bool(rng.integers(0, 2)),
                      ctx=np.full(2, t, np.float32), next_ctx=np.full(2, t + 1, np.float32))
            t += 1
            if on_step is not None:
                on_step(t)


def _rows(replay: Replay) -> list[tuple]:
    """Every transition of a replay as (obs frames, next frames, action, reward, discount, ctx)."""
    n = len(replay)
    obs = stack_frames(replay.frames[replay.obs_ids[:n] % replay.capacity])
    nxt = stack_frames(replay.frames[replay.next_ids[:n] % replay.capacity])
    return [(obs[i].tobytes(), nxt[i].tobytes(), replay.action[i].tobytes(), float(replay.reward[i]),
             float(replay.discount[i]), replay.ctx[i].tobytes(), replay.next_ctx[i].tobytes()) for i in range(n)]


@pytest.mark.parametrize("ship", [1, 5, 17])
def test_batches_shipped_through_an_outbox_land_in_replay_as_the_adder_wrote_them(ship):
    """The same stream written straight into a replay, and through an outbox cut into batches of
    ``ship`` steps: the merged replay holds the same transitions over the same frames."""
    k, n_step = 3, 3
    config = tiny(f"learner.n_step={n_step}", f"observation.stack={k}")
    direct = Replay((4, 4, 1), k, 2, 4.0, 0)
    _walk(NStepAdder(direct, 0.9, n_step), np.random.default_rng(5), 200, k)

    merged = Replay((4, 4, 1), k, 2, 4.0, 0)
    outbox = Outbox((4, 4, 1), k, 2, keep=reach_back(config))
    extra = []  # frames a batch carries beyond those written while its steps were taken
    pushed = [0]

    def ship_every(t: int) -> None:
        if t % ship == 0:
            batch = outbox.take(ship)
            extra.append(len(batch.frames) - (outbox.frames_written - pushed[0]))
            pushed[0] = outbox.frames_written
            merged.extend(batch)

    _walk(NStepAdder(outbox, 0.9, n_step), np.random.default_rng(5), 200, k, ship_every)
    merged.extend(outbox.take(0))
    assert _rows(merged) == _rows(direct)
    assert len(outbox._frames) <= reach_back(config)  # the outbox keeps only what later transitions can reach
    assert max(extra) <= reach_back(config)  # a batch carries its own frames and a few sent before, no backlog


def test_an_outbox_that_keeps_too_few_frames_says_so():
    outbox = Outbox((4, 4, 1), 2, 1, keep=1)
    adder = NStepAdder(outbox, 0.9, 3)
    with pytest.raises(ValueError, match="keep = 1 frames is too few"):
        for t in range(8):
            adder.add(np.zeros((2, 4, 4, 1), np.uint8) if t == 0 else None, np.zeros(4, np.float32), 1.0,
                      np.zeros((4, 4, 1), np.uint8), first=t == 0, last=False, starts=True, ends=True,
                      ctx=np.zeros(1, np.float32), next_ctx=np.zeros(1, np.float32))
            outbox.take(1)


# ---------------------------------------------------------------- a worker, in this process

def test_a_worker_acts_only_the_steps_it_is_granted_and_installs_weights_between_decisions():
    config = tiny("game.episode_steps=30", "learner.schedule.warmup_steps=20", "run.ship_steps=25")
    worker = Worker(config, 1)
    try:
        batch, report = worker.collect(25, 0, -1, None)
        assert len(batch) == 0 and report.steps == 0  # nothing was under way: an empty batch, at once
        batch, report = worker.collect(25, 25, -1, None)
        assert report.steps == batch.steps == 25 and len(batch) > 0 and report.version == -1
        assert len(report.places) == 26  # the episode's first place, then one per step
        assert batch.frames.dtype == np.uint8 and batch.obs_ids.max() < len(batch.frames)
        # New weights: the next batch is acted with them, installed on the acting thread.
        weights = {"policy": [np.full(w.shape, 0.01, np.float32) for w in worker.agent.actor.policy_net.weights],
                   "novelty": []}
        batch, report = worker.collect(0, 50, 1, [weights])  # the batch under way, and no further grant
        assert report.steps == 25
        assert report.ends == [4] and report.outcomes == ["timeout"]  # step 30 of the run: the 5th of this batch
        batch, report = worker.collect(25, 50, 1, [weights])
        assert report.steps == 0  # it had been granted nothing more: it was idle
        batch, report = worker.collect(0, 75, 1, [weights])
        assert report.version == 1 and report.steps == 25
        assert all(np.allclose(w.numpy(), 0.01) for w in worker.agent.actor.policy_net.weights)
        assert report.ends == [9]  # step 60
        assert worker.agent.actor.steps >= 75  # the run's steps count for the warm-up, not this worker's alone
    finally:
        worker.stop()
    assert not worker._thread.is_alive()


def test_a_worker_in_a_process_of_its_own_acts_on_the_cpu_with_pools_of_its_cpus():
    """As a Ray actor's: TensorFlow's thread pools sized to ``run.worker_cpus`` before the game and the
    actor are made, which then act."""
    code = f"""
import tensorflow as tf
from explorer.config import load
from explorer.run.workers import Worker
worker = Worker(load(None, {[*TINY, "run.worker_cpus=3"]!r}), 0, own_process=True)
try:
    assert worker.collect(5, 0, -1, None)[1].steps == 0
    assert worker.collect(0, 5, -1, None)[1].steps == 5
finally:
    worker.stop()
threading = tf.config.threading
print(threading.get_inter_op_parallelism_threads(), threading.get_intra_op_parallelism_threads())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines()[-1] == "3 3"


def test_a_learner_service_trains_at_most_at_its_update_to_data_ratio_and_resumes(tmp_path):
    config = tiny("learner.schedule.warmup_steps=16", "learner.schedule.update_every=4", "learner.schedule.publish_every=2",
                  "observation.stack=2")
    (tmp_path / "config.toml").write_text("")
    published = []
    service = LearnerService(config, tmp_path, (16, 16, 3), publish=lambda w: published.append(w) or len(published))
    worker = Worker(config, 0)
    try:
        worker.collect(16, 0, -1, None)
        for i in range(1, 5):
            batch, report = worker.collect(16 if i < 4 else 0, 16 * i, -1, None)
            status = service.add(batch, 0)
        assert status["steps"] == 64 and status["by_worker"] == {0: status["transitions"]}
        deadline = 300  # only a guard against a hang: it waits for the updates
        import time
        t0 = time.monotonic()
        while service.updates < service.target() and time.monotonic() - t0 < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # it must not go beyond the ratio, however long it is left alone
        assert service.updates == service.target() == (64 - 16) // 4 + 1
        assert service.version == service.updates // 2 and len(published) == service.version + 1
        assert set(published[-1]) == {"policy", "novelty"}
        service.stop()
        path = service.save()
        assert path.endswith("learner-64")
    finally:
        worker.stop()
        service.stop()
    again = LearnerService(config, tmp_path, (16, 16, 3), resume=True)
    try:
        assert again.start == again.steps == 64 and again.updates == 13 and len(again.agent.replay) == len(service.agent.replay)
    finally:
        again.stop()


def test_a_learner_service_refuses_a_run_directory_it_cannot_see(tmp_path):
    from explorer.core import ExplorerError

    with pytest.raises(ExplorerError, match="not visible: put run.dir on a filesystem every node"):
        LearnerService(tiny(), tmp_path / "elsewhere", (16, 16, 3))


def test_learned_novelty_weights_travel_to_a_copy():
    from explorer.agent.novelty import make_novelty

    config = tiny("novelty.signal=rnd")
    a, b = (make_novelty(config.novelty, (16, 16, 3), 1) for _ in range(2))
    for w in a.predictor.weights:
        w.assign(w + 0.5)
    b.set_learned_weights(a.get_learned_weights())
    assert all(np.array_equal(x.numpy(), y.numpy()) for x, y in zip(a.predictor.weights, b.predictor.weights, strict=True))
    assert make_novelty(tiny().novelty, (16, 16, 3), 1).get_learned_weights() == []  # pixel novelty learns nothing


# ---------------------------------------------------------------- without Ray

def test_workers_without_ray_is_one_clear_line_and_creates_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    code = cli.main(["explore", "--workers", "2", "--out", str(tmp_path), "--no-progress",
                     *[a for s in TINY for a in ("--set", s)]])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1
    assert "pip install -e '.[ray]'" in err and err.startswith("explorer: run.workers = 2")
    assert not list(tmp_path.iterdir())


def test_one_worker_never_imports_ray(tmp_path):
    """``import explorer`` and an explore run with run.workers = 1 work where Ray cannot be imported."""
    code = f"""
import sys
sys.modules["ray"] = None
import explorer, explorer.cli, explorer.run.explore
from explorer import cli
args = ["explore", "--steps", "40", "--out", {str(tmp_path)!r}, "--no-progress", "--set", "learner.schedule.warmup_steps=20"]
for s in {TINY!r}:
    args += ["--set", s]
assert cli.main(args) == 0
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "steps 40" in out.stdout
