"""Sessions on disk: recording, crash safety, damaged files, transitions, replay and evaluation."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from explorer.envs.sessions.dataset import stack_index
from explorer.envs.sessions.format import JOURNAL, SessionError
from explorer.envs.sessions.reader import Session, sessions_dataset
from explorer.envs.sessions.writer import LoopRecorder, Recorder, RecorderError
from explorer.testing.fakes import FakeScreen

REPO = Path(__file__).resolve().parents[1]


def noisy_screen(shape=(12, 10, 3), seed=0) -> FakeScreen:
    rng = np.random.default_rng(seed)
    return FakeScreen(make=lambda i: rng.integers(0, 256, shape, dtype=np.uint8), shape=shape)


def write_session(path: Path, n: int, chunk_frames: int, episode: int = 0, shape=(4, 4, 1)) -> Path:
    """Frame i is filled with i; action i is [i, -i, i/2, 1] / 1000; reward i; episodes of ``episode`` steps."""
    with Recorder(path, {"source": "test"}, chunk_frames=chunk_frames, block_s=None) as rec:
        for i in range(n):
            first = i == 0 or (episode and i % episode == 0)
            last = bool(episode) and i % episode == episode - 1
            rec.add(np.full(shape, i % 256, np.uint8), np.array([i, -i, i / 2, 1], np.float32) / 1000, float(i),
                    first=bool(first), last=last)
    return path


# ---------------------------------------------------------------- round trip

def test_round_trip_from_fake_screen(tmp_path):
    screen = noisy_screen()
    rng = np.random.default_rng(1)
    frames, actions = [], []
    with Recorder(tmp_path / "s", {"source": "fake", "config": {"a": 1}}, chunk_frames=7) as rec:
        for i in range(30):
            frame = screen.grab()
            action = rng.uniform(-1, 1, 4).astype(np.float32)
            frames.append(frame.copy())
            actions.append(action)
            rec.add(frame, action, reward=0.25 * i, first=i == 0, last=i == 29, t=100.0 + i / 30)
            frame[:] = 0  # the recorder copied it; changing ours must not change the session
    s = Session(tmp_path / "s")
    health = s.health(verify=True)
    assert health.ok and health.summary() == "complete"
    assert (len(s), s.chunks, s.episodes, s.frame_shape) == (30, 5, 1, (12, 10, 3))
    assert s.duration_s == pytest.approx(29 / 30)
    assert s.meta["meta"] == {"source": "fake", "config": {"a": 1}}
    assert s.meta["status"] == "complete" and "numpy" in s.meta["versions"]
    assert not (tmp_path / "s" / JOURNAL).exists()
    got = list(s.frames())
    assert len(got) == 30 and all(np.array_equal(a, b) for a, b in zip(got, frames, strict=True))
    steps = list(s.iter_steps())
    assert [st.index for st in steps] == list(range(30))
    np.testing.assert_array_equal(np.stack([st.action for st in steps]), np.stack(actions))  # float32 exact
    assert [st.reward for st in steps] == [0.25 * i for i in range(30)]
    assert [st.first for st in steps] == [True] + [False] * 29
    assert [st.last for st in steps] == [False] * 29 + [True]


def test_unknown_actions_and_rewards_read_as_nan(tmp_path):
    with Recorder(tmp_path / "s", {}, chunk_frames=4) as rec:
        for i in range(5):
            rec.add(np.zeros((2, 2, 1), np.uint8), None, None, first=i == 0, last=False)
    s = Session(tmp_path / "s")
    assert not s.has_actions
    step = next(s.iter_steps())
    assert np.isnan(step.action).all() and np.isnan(step.reward)


def test_recorder_refuses_bad_input_and_existing_session(tmp_path):
    rec = Recorder(tmp_path / "s", {})
    rec.add(np.zeros((4, 4, 3), np.uint8), np.zeros(4), 0.0, True, False)
    with pytest.raises(RecorderError, match="shape changed"):
        rec.add(np.zeros((4, 5, 3), np.uint8), np.zeros(4), 0.0, False, False)
    with pytest.raises(RecorderError, match="uint8"):
        rec.add(np.zeros((4, 4, 3), np.float32), np.zeros(4), 0.0, False, False)
    with pytest.raises(RecorderError, match="4 stick axes"):
        rec.add(np.zeros((4, 4, 3), np.uint8), np.zeros(3), 0.0, False, False)
    rec.close()
    with pytest.raises(RecorderError, match="closed"):
        rec.add(np.zeros((4, 4, 3), np.uint8), np.zeros(4), 0.0, False, False)
    with pytest.raises(RecorderError, match="already holds a session"):
        Recorder(tmp_path / "s", {})
    assert len(Session(tmp_path / "s")) == 1


@pytest.mark.parametrize("whole_chunks", [0, 1])
def test_writer_error_surfaces_on_next_add(tmp_path, monkeypatch, whole_chunks):
    import explorer.envs.sessions.writer as record

    written = []

    def fills_up(*args, **kwargs):
        if len(written) >= whole_chunks:
            raise OSError(28, "No space left on device")
        written.append(args)
        write_chunk(*args, **kwargs)

    write_chunk = record.write_chunk
    monkeypatch.setattr(record, "write_chunk", fills_up)
    rec = Recorder(tmp_path / "s", {}, chunk_frames=2)
    with pytest.raises(RecorderError, match="No space left") as err:
        for i in range(200):
            rec.add(np.zeros((2, 2, 1), np.uint8), np.zeros(4), 0.0, i == 0, False)
            time.sleep(0.002)
    assert isinstance(err.value.__cause__, OSError)
    with pytest.raises(RecorderError, match="^cannot write session .*: No space left on device; ") as err:
        rec.close()
    if whole_chunks:  # what was written before stays readable
        assert "the 2 steps written before are kept" in str(err.value)
        assert Session(tmp_path / "s").status == "failed" and len(Session(tmp_path / "s")) == 2
    else:  # a session that never held a frame is not left half-made
        assert "nothing was recorded, so the session folder is not kept" in str(err.value)
        assert not (tmp_path / "s").exists()


def test_a_full_disk_when_a_session_starts_leaves_nothing(tmp_path, monkeypatch):
    import explorer.envs.sessions.writer as record

    def full(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(record, "atomic_write", full)  # meta.json is the first file written whole
    with pytest.raises(RecorderError, match=r"^cannot create the session .*/s: No space left on device; free space"):
        Recorder(tmp_path / "s", {})
    assert list(tmp_path.iterdir()) == []


def test_add_is_cheap_on_the_calling_thread(tmp_path, monkeypatch):
    """add() copies the frame and queues it: it never waits for the disk, so it returns however slowly the
    chunks are written (here: never, until the steps are all taken)."""
    import explorer.envs.sessions.writer as recorder

    frame = np.random.default_rng(0).integers(0, 256, (128, 128, 3), dtype=np.uint8)
    writing, release, writers = threading.Event(), threading.Event(), []
    write_chunk = recorder.write_chunk

    def stuck(*args, **kwargs):
        writers.append(threading.current_thread().name)
        writing.set()
        release.wait(300)  # only a guard against a hang
        return write_chunk(*args, **kwargs)

    monkeypatch.setattr(recorder, "write_chunk", stuck)
    try:
        with Recorder(tmp_path / "s", {}, chunk_frames=32) as rec:
            for i in range(120):
                rec.add(frame, np.zeros(4, np.float32), 0.0, i == 0, False)
            assert writing.wait(300), "the writer never started the first chunk"
            assert rec.steps == 120 and rec.committed == 0 and rec.wait_s == 0.0  # all taken while it was stuck
            release.set()
    finally:
        release.set()
    assert set(writers) == {"session-writer"}  # chunks are written on the writer's thread only
    assert len(Session(tmp_path / "s")) == 120


# ---------------------------------------------------------------- crash safety

CHILD = textwrap.dedent("""
    import sys, time, numpy as np
    from pathlib import Path
    from explorer.envs.sessions.writer import Recorder
    path, mode = Path(sys.argv[1]), sys.argv[2]
    rec = Recorder(path, {"source": "child"}, chunk_frames=8)
    i = 0
    def add():
        global i
        rec.add(np.full((6, 6, 1), i % 256, np.uint8), np.full(4, i / 100, np.float32), float(i), i == 0, False)
        i += 1
    if mode == "hold":
        for _ in range(3 * 8 + 5):  # three whole chunks, then five steps that wait for the fourth
            add()
        while len((path / "journal.jsonl").read_text().splitlines()) < 5 or rec.committed < 24:
            time.sleep(0.005)
        (path / "ready").touch()
        time.sleep(60)
    else:
        while True:
            add()
            time.sleep(0.001)
""")


def run_child(path: Path, mode: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", CHILD, str(path), mode], env=env)


def wait_for(condition, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        time.sleep(0.01)


def test_sigkill_keeps_whole_chunks_and_counts_what_was_lost(tmp_path):
    path = tmp_path / "s"
    child = run_child(path, "hold")
    try:
        wait_for(lambda: (path / "ready").exists() or child.poll() is not None)
        assert child.poll() is None, "the recording child died on its own"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    s = Session(path)
    health = s.health(verify=True)
    assert health.status == "recording" and not health.ok
    assert (health.steps, health.chunks, health.lost_steps) == (24, 3, 5)
    assert "5 steps lost after step 24" in health.summary()
    frames = list(s.frames())
    assert [int(f[0, 0, 0]) for f in frames] == list(range(24))
    assert [st.reward for st in s.iter_steps()] == [float(i) for i in range(24)]


def test_sigkill_mid_write_leaves_a_readable_session(tmp_path):
    path = tmp_path / "s"
    child = run_child(path, "busy")
    try:
        wait_for(lambda: len(list((path / "chunks").glob("*.npz"))) >= 4 if (path / "chunks").exists() else False)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    s = Session(path)
    s.verify()
    assert s.steps >= 24 and s.steps % 8 == 0
    assert [int(f[0, 0, 0]) for f in s.frames()] == [i % 256 for i in range(s.steps)]
    assert s.lost_steps <= 8 + 8 * 4 + 8  # a chunk being filled plus the queue


# ---------------------------------------------------------------- damaged and foreign files

def test_truncated_chunk_is_an_error_naming_the_file(tmp_path):
    path = write_session(tmp_path / "s", 20, chunk_frames=8)
    chunk = path / "chunks" / "000001.npz"
    data = chunk.read_bytes()
    chunk.write_bytes(data[: len(data) // 2])
    s = Session(path)  # the log is intact; the damage shows when the chunk is touched
    with pytest.raises(SessionError, match="000001.npz.*truncated or corrupt"):
        s.health()
    with pytest.raises(SessionError, match="000001.npz"):
        list(s.frames())


def test_corrupt_chunk_is_an_error_naming_the_file(tmp_path):
    path = write_session(tmp_path / "s", 20, chunk_frames=8, shape=(16, 16, 1))
    chunk = path / "chunks" / "000000.npz"
    data = bytearray(chunk.read_bytes())
    for j in range(200, 240):  # inside the compressed frames
        data[j] ^= 0xFF
    chunk.write_bytes(bytes(data))
    with pytest.raises(SessionError, match="000000.npz.*truncated or corrupt"):
        Session(path).verify()
    with pytest.raises(SessionError, match="000000.npz"):
        next(Session(path).frames())


def test_missing_chunk_and_foreign_files_are_errors(tmp_path):
    path = write_session(tmp_path / "s", 20, chunk_frames=8)
    (path / "chunks" / "000001.npz").unlink()
    with pytest.raises(SessionError, match="000001.npz: chunk file is missing"):
        Session(path).health()

    path = write_session(tmp_path / "t", 10, chunk_frames=8)
    np.savez(path / "chunks" / "000000.npz", something=np.zeros(3))
    with pytest.raises(SessionError, match="000000.npz: not a session chunk"):
        Session(path).health()

    with pytest.raises(SessionError, match="meta.json: not found"):
        Session(tmp_path)
    (tmp_path / "u").mkdir()
    (tmp_path / "u" / "meta.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(SessionError, match="meta.json: not an explorer session"):
        Session(tmp_path / "u")

    path = write_session(tmp_path / "v", 10, chunk_frames=4)
    lines = (path / "steps.jsonl").read_text().splitlines(keepends=True)
    lines[3] = "garbage\n"
    (path / "steps.jsonl").write_text("".join(lines))
    with pytest.raises(SessionError, match="steps.jsonl: line 4 is not a step record"):
        Session(path)


# ---------------------------------------------------------------- transitions

def test_stack_index_stops_at_episode_starts():
    first = np.array([1, 0, 0, 1, 0], bool)
    np.testing.assert_array_equal(stack_index(first, 3), [[0, 0, 0], [0, 0, 1], [0, 1, 2], [3, 3, 3], [3, 3, 4]])


def test_dataset_yields_stacked_transitions_across_chunks_and_episodes(tmp_path):
    # Episode 0: steps 0..3 (3 is last); episode 1: steps 4..6, cut off (no last). Chunks of 3 frames.
    with Recorder(tmp_path / "s", {}, chunk_frames=3) as rec:
        for i in range(7):
            rec.add(np.full((2, 2, 1), 10 * i, np.uint8), np.full(4, i / 10, np.float32), float(i),
                    first=i in (0, 4), last=i == 3)
    batches = list(Session(tmp_path / "s").dataset(stack=2, batch_size=2))
    assert [int(b["index"].shape[0]) for b in batches] == [2, 2, 1]
    got = {k: np.concatenate([b[k].numpy() for b in batches]) for k in batches[0]}
    np.testing.assert_array_equal(got["index"], [0, 1, 2, 4, 5])
    assert got["obs"].shape == (5, 2, 2, 2, 1) and got["obs"].dtype == np.uint8
    np.testing.assert_array_equal(got["obs"][:, :, 0, 0, 0], [[0, 0], [0, 10], [10, 20], [40, 40], [40, 50]])
    np.testing.assert_array_equal(got["next_obs"][:, :, 0, 0, 0], [[0, 10], [10, 20], [20, 30], [40, 50], [50, 60]])
    np.testing.assert_allclose(got["action"][:, 0], [0.0, 0.1, 0.2, 0.4, 0.5])
    np.testing.assert_array_equal(got["reward"], [0, 1, 2, 4, 5])
    np.testing.assert_array_equal(got["first"], [True, False, False, True, False])
    np.testing.assert_array_equal(got["last"], [False, False, True, False, False])


def test_shuffled_dataset_holds_the_same_transitions(tmp_path):
    path = write_session(tmp_path / "s", 100, chunk_frames=8, episode=30)
    plain = {int(i) for b in sessions_dataset([path], 3, 16) for i in b["index"].numpy()}
    shuffled = [int(i) for b in sessions_dataset([path], 3, 16, shuffle=40, seed=0) for i in b["index"].numpy()]
    assert sorted(shuffled) == sorted(plain) and shuffled != sorted(shuffled)
    assert len(plain) == 100 - 1 - 3  # three episode ends, and the last step has no successor


def test_loop_recorder_pairs_each_frame_with_the_action_taken_on_it(tmp_path):
    rec = Recorder(tmp_path / "s", {}, chunk_frames=4)
    loop = LoopRecorder(rec)
    frame = lambda v: np.full((2, 2, 1), v, np.uint8)  # noqa: E731
    loop.begin(frame(0))
    loop.step(np.full(4, 0.1), 1.0, frame(1), last=False)
    loop.step(np.full(4, 0.2), 2.0, frame(2), last=True)  # the episode ends on frame 2
    loop.begin(frame(3))
    loop.step(np.full(4, 0.3), 3.0, frame(4), last=False)
    loop.close()  # frame 4 is held; it closes the run
    steps = list(Session(tmp_path / "s").iter_steps())
    assert [(s.first, s.last) for s in steps] == [(True, False), (False, False), (False, True), (True, False), (False, True)]
    assert [s.reward for s in steps][:2] == [1.0, 2.0] and np.isnan(steps[2].reward)
    assert [int(f[0, 0, 0]) for f in Session(tmp_path / "s").frames()] == [0, 1, 2, 3, 4]


# ---------------------------------------------------------------- CLI pieces

def test_record_of_a_black_screen_warns_early_then_stops_keeping_what_it_recorded(tmp_path, capsys):
    from explorer.config import Config
    from explorer.core import ExplorerError
    from explorer.run.record import record_screen

    config = Config().replace(**{"capture.fps": 100.0, "capture.blank_seconds": 2.0})
    black = FakeScreen([np.zeros((8, 8, 1), np.uint8)])  # a black region, a minimised or DirectX window
    with pytest.raises(ExplorerError) as err:
        record_screen(config, tmp_path, seconds=60, hz=20, screen=black, chunk_frames=4)
    assert re.fullmatch(r"explorer: warning: the captured frames have been uniform \(blank or black\) for 0\.\d s: is "
                        r"the game window visible, not minimised and inside the capture region\? The run stops if "
                        r"this lasts capture.blank_seconds = 2 s\n", capsys.readouterr().err)
    (path,) = tmp_path.iterdir()
    session = Session(path)
    assert session.status == "complete" and session.steps > 10
    assert str(err.value) == ("the captured frames have been uniform (blank or black) for 2 s: is the game window "
                              f"visible, not minimised and inside the capture region? Recording stopped: kept session "
                              f"{path}, with the {session.steps} frames recorded before")


def test_record_screen_and_sessions_listing(tmp_path, capsys):
    from explorer import cli
    from explorer.config import Config
    from explorer.run.record import record_screen
    from explorer.run.sessions import list_sessions

    config = Config().replace(**{"capture.fps": 100.0})
    stop = threading.Event()
    summary = record_screen(config, tmp_path, seconds=0.6, hz=20, screen=FakeScreen.counting((8, 8, 1)), stop=stop,
                            chunk_frames=4)
    s = Session(summary["path"])
    steps = list(s.iter_steps())
    assert 8 <= len(steps) <= 16 and summary["health"] == "complete"
    assert steps[0].first and steps[-1].last and not any(st.first for st in steps[1:])
    assert np.isnan(steps[0].action).all()
    assert s.meta["meta"]["source"] == "screen" and s.meta["meta"]["config"]["capture"]["fps"] == 100.0
    values = [int(f[0, 0, 0]) for f in s.frames()]
    assert values == sorted(values)  # frames in capture order

    write_session(tmp_path / "crashed", 10, chunk_frames=4)
    meta = json.loads((tmp_path / "crashed" / "meta.json").read_text())
    (tmp_path / "crashed" / "meta.json").write_text(json.dumps({**meta, "status": "recording"}))
    rows = {Path(r["path"]).name: r for r in list_sessions([tmp_path])}
    assert rows["crashed"]["health"].startswith("cut off") and rows["crashed"]["steps"] == 10

    parser = cli.build_parser()
    args = parser.parse_args(["sessions", str(tmp_path)])
    assert args.handler(args) == 1  # one session is not complete
    out = capsys.readouterr().out
    assert "crashed" in out and "cut off" in out and "8x8x1" in out
    args = parser.parse_args(["replay", "a", "--evaluate", "ckpt"])
    assert args.evaluate == "ckpt" and args.sessions == ["a"]


# ---------------------------------------------------------------- replay and evaluation (the real learner)

def test_replay_trains_the_learner_and_evaluation_writes_plots(tmp_path):
    from explorer.config import Config, NoveltyConfig
    from explorer.run.builder import build_agent
    from explorer.run.replay import evaluate, replay_train

    rng = np.random.default_rng(0)
    with Recorder(tmp_path / "s", {"source": "test"}, chunk_frames=16) as rec:
        for i in range(60):
            rec.add(rng.integers(0, 256, (16, 16, 1), dtype=np.uint8), rng.uniform(-1, 1, 4).astype(np.float32),
                    None, first=i in (0, 30), last=i == 29)
    learner = Config().replace(**{"learner.schedule.batch_size": 8, "learner.schedule.warmup_steps": 8, "learner.schedule.update_every": 1,
                                  "learner.schedule.replay_mb": 1.0, "learner.networks.filters": (4,), "learner.networks.feature": 16,
                                  "learner.networks.hidden": 16}).learner
    base = Config()
    config = base.model_copy(update={"learner": learner, "novelty": NoveltyConfig(signal="pixel"),
                                     "observation": base.observation.model_copy(update={"stack": 2}),
                                     "run": base.run.model_copy(update={"log_every": 10})})
    agent = build_agent(config, (16, 16, 1))
    before = [w.numpy().copy() for w in agent.learner.actor.weights]
    summary = replay_train(config, [tmp_path / "s"], run_path=tmp_path / "run", agent=agent)
    assert summary["transitions"] == 58 and summary["updates"] > 30
    after = agent.learner.actor.weights
    assert any(not np.allclose(a, b.numpy()) for a, b in zip(before, after, strict=True))
    assert summary["checkpoint"].endswith("learner-58")
    assert (tmp_path / "run" / "checkpoints" / "state-58" / "actor" / "actor.json").exists()
    resumed = build_agent(config, (16, 16, 1))
    assert resumed.checkpointer(tmp_path / "run" / "checkpoints").restore() == 58  # continues live or on the game
    np.testing.assert_array_equal(resumed.learner.actor.weights[0].numpy(), after[0].numpy())
    assert list((tmp_path / "run" / "tb").iterdir()) and (tmp_path / "run" / "training.png").stat().st_size > 0

    evaluation = evaluate(config, [tmp_path / "s"], tmp_path / "run", tmp_path / "eval")
    assert evaluation["transitions"] == 58 and evaluation["recorded_actions"] == 58
    # a session of sticks alone, evaluated by an agent that also holds A: A counts as released in the session
    assert set(evaluation["action_mse"]) == {"camera_x", "camera_y", "walk_x", "walk_y", "button_a"}
    assert np.isfinite(evaluation["novelty_mean"])
    for name in ("novelty.png", "actions.png", "evaluation.json", "evaluation.npz"):
        assert (tmp_path / "eval" / name).stat().st_size > 0
