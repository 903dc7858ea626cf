"""Damaged or hostile sessions and checkpoints: every field read from disk is checked, sizes are bounded
before anything is allocated, and each error is one line naming the file and the field."""

from __future__ import annotations

import json
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from explorer.config import Config, ConfigError, LearnerConfig, NetworksConfig, load
from explorer.envs.sessions.format import SessionError
from explorer.envs.sessions.reader import Session
from explorer.envs.sessions.writer import Recorder, RecorderError

SHAPE = (6, 8, 1)


def record(path: Path, n: int = 10, chunk_frames: int = 4, buttons: tuple[str, ...] = ("a",), shape=SHAPE) -> Path:
    """A small real session: frame i filled with i, action [i/100, 0, 0, 0.5] then each button pressed."""
    with Recorder(path, {"source": "test"}, chunk_frames=chunk_frames, block_s=None, buttons=buttons) as rec:
        for i in range(n):
            action = np.array([i / 100, 0, 0, 0.5, *([1.0] * len(buttons))], np.float32)
            rec.add(np.full(shape, i, np.uint8), None if i == n - 1 else action, 0.5, first=i == 0, last=i == n - 1)
    return path


def edit_meta(path: Path, **changes) -> None:
    meta = json.loads((path / "meta.json").read_text())
    for key, value in changes.items():
        if value is ...:
            del meta[key]
        else:
            meta[key] = value
    (path / "meta.json").write_text(json.dumps(meta))


def edit_step(path: Path, index: int, **changes) -> None:
    lines = (path / "steps.jsonl").read_text().splitlines(keepends=True)
    rec = json.loads(lines[index])
    rec.update(changes)
    lines[index] = json.dumps(rec) + "\n"  # json writes NaN as NaN, which Python's reader reads back
    (path / "steps.jsonl").write_text("".join(lines))


def one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text, text
    return text


# ---------------------------------------------------------------- meta.json

@pytest.mark.parametrize("changes, field", [
    ({"chunk_frames": 0}, "chunk_frames = 0"),
    ({"chunk_frames": -3}, "chunk_frames = -3"),
    ({"chunk_frames": 10**9}, "chunk_frames = 1000000000"),
    ({"chunk_frames": "64"}, "chunk_frames = '64'"),
    ({"chunk_frames": 4.0}, "chunk_frames = 4.0"),
    ({"chunk_frames": ...}, "chunk_frames is missing"),
    ({"steps": "many"}, "steps = 'many'"),
    ({"steps": -1}, "steps = -1"),
    ({"buttons": "alt"}, "buttons = 'alt'"),
    ({"buttons": ["a", "jump"]}, "names no pad button ['jump']"),
    ({"buttons": ["a", "a"]}, "lists a button twice"),
    ({"frame_shape": [100000, 8, 1]}, "frame_shape.0 = 100000"),
    ({"frame_shape": [6, 8]}, "frame_shape.2 is missing"),
    ({"frame_shape": "6x8x1"}, "frame_shape = '6x8x1'"),
    ({"status": "done"}, "status = 'done'"),
    ({"first_t": "t0"}, "first_t = 't0'"),
    ({"meta": 5}, "meta = 5"),
])
def test_a_bad_meta_field_is_one_line_naming_the_file_and_the_field(tmp_path, changes, field):
    path = record(tmp_path / "s")
    edit_meta(path, **changes)
    with pytest.raises(SessionError) as err:
        Session(path)
    message = one_line(err)
    assert message.startswith(f"{path / 'meta.json'}: ") and field in message, message


def test_a_chunk_too_large_for_a_session_is_refused_from_its_size_alone(tmp_path):
    path = record(tmp_path / "s")
    edit_meta(path, chunk_frames=4096, frame_shape=[16384, 16384, 4])
    with pytest.raises(SessionError, match="make chunks of more than"):
        Session(path)


# ---------------------------------------------------------------- steps.jsonl

@pytest.mark.parametrize("changes, field", [
    ({"t": "abc"}, "line 4 is not a step record: t = 'abc'"),
    ({"t": None}, "line 4 is not a step record: t = None"),
    ({"first": 1}, "line 4 is not a step record: first = 1"),
    ({"a": "left"}, "line 4 is not a step record: a = 'left'"),
    ({"i": "3"}, "line 4 is not a step record: i = '3'"),
    ({"r": [1]}, "line 4 is not a step record: r = [1]"),
])
def test_a_bad_step_field_is_one_line_naming_the_log_line_and_field(tmp_path, changes, field):
    path = record(tmp_path / "s")
    edit_step(path, 3, **changes)
    with pytest.raises(SessionError) as err:
        Session(path)
    message = one_line(err)
    assert message.startswith(f"{path / 'steps.jsonl'}: ") and field in message, message


@pytest.mark.parametrize("action", [[float("nan"), 0, 0, 0.5, 1], [0.1, None, 0, 0.5, 1], [float("inf"), 0, 0, 0, 1],
                                    [1e300, 0, 0, 0, 1]])
def test_a_non_finite_recorded_action_is_a_data_error_naming_the_session_and_step(tmp_path, action):
    path = record(tmp_path / "s")
    edit_step(path, 5, a=action)
    with pytest.raises(SessionError) as err:
        Session(path)
    assert one_line(err).startswith(f"{path / 'steps.jsonl'}: step 5 has a non-finite action")


def test_the_recorder_refuses_to_write_what_the_reader_refuses(tmp_path):
    with pytest.raises(ValueError, match="chunk_frames must be from 1 to 4096"):
        Recorder(tmp_path / "big", chunk_frames=5000)
    with Recorder(tmp_path / "nan", chunk_frames=4, buttons=()) as rec, \
            pytest.raises(RecorderError, match="step 0: the action .* is not finite"):
        rec.add(np.zeros(SHAPE, np.uint8), np.array([np.nan, 0, 0, 0], np.float32), 0.0, first=True, last=False)
    with pytest.raises(ConfigError, match="record.chunk_frames"):
        load(None, ["record.chunk_frames=5000"])


# ---------------------------------------------------------------- chunks: bounded before allocating

def rewrite_chunk(path: Path, header_shape: tuple[int, ...], frames: np.ndarray, start: int = 0) -> None:
    """A chunk whose frames.npy header declares ``header_shape`` but holds only ``frames``' bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("frames.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(member, {"descr": "|u1", "fortran_order": False,
                                                          "shape": header_shape})
            member.write(frames.tobytes())
        with z.open("start.npy", "w") as member:
            np.lib.format.write_array(member, np.array([start], np.int64))


def peak_while(fn) -> tuple[int, BaseException | None]:
    tracemalloc.start()
    caught = None
    try:
        fn()
    except BaseException as err:  # noqa: BLE001 (the caller checks what was raised)
        caught = err
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak, caught


def test_a_chunk_header_declaring_100000_frames_allocates_nothing_for_them(tmp_path):
    path = record(tmp_path / "s", n=10, chunk_frames=4, shape=(64, 64, 3))
    chunk = path / "chunks" / "000000.npz"
    rewrite_chunk(chunk, (100_000, 64, 64, 3), np.zeros((4, 64, 64, 3), np.uint8))  # 1.1 GiB declared
    session = Session(path)
    peak, err = peak_while(lambda: list(session.frames()))
    assert isinstance(err, SessionError) and "\n" not in str(err) and str(chunk) in str(err), err
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MiB allocated reading a damaged chunk"
    with pytest.raises(SessionError, match="000000.npz: .*100000, 64, 64, 3"):
        session.health()


def test_a_chunk_header_agreeing_with_the_log_but_not_with_the_file_size_allocates_nothing(tmp_path):
    path = record(tmp_path / "s", n=8, chunk_frames=4)
    edit_meta(path, frame_shape=[4000, 4000, 3])  # within the bounds; 4 such frames are 183 MiB
    chunk = path / "chunks" / "000000.npz"
    rewrite_chunk(chunk, (4, 4000, 4000, 3), np.zeros(4 * 6 * 8, np.uint8))
    rewrite_chunk(path / "chunks" / "000001.npz", (4, 4000, 4000, 3), np.zeros(4 * 6 * 8, np.uint8), start=4)
    session = Session(path)
    peak, err = peak_while(lambda: list(session.frames()))
    assert isinstance(err, SessionError) and str(chunk) in str(err) and "cannot hold" in str(err), err
    assert peak < 32 * 2**20, f"{peak / 2**20:.0f} MiB allocated reading a damaged chunk"


def test_a_leftover_chunk_with_a_huge_header_counts_no_more_than_a_chunk(tmp_path):
    path = record(tmp_path / "s", n=8, chunk_frames=4)
    edit_meta(path, status="recording")
    rewrite_chunk(path / "chunks" / "000002.npz", (3_000_000, 6, 8, 1), np.zeros(10, np.uint8), start=8)
    peak, err = peak_while(lambda: Session(path).health())
    assert err is None and peak < 16 * 2**20, f"{peak / 2**20:.0f} MiB to count what a leftover chunk claims"
    assert Session(path).health().lost_steps == 0  # its header is not believed


def test_meta_claiming_a_huge_number_of_steps_is_counted_not_listed(tmp_path):
    path = record(tmp_path / "s", n=8, chunk_frames=4)
    edit_meta(path, steps=3_000_000)  # any number: what it claims costs nothing to count
    peak, err = peak_while(lambda: Session(path).health())
    assert err is None and peak < 16 * 2**20, f"{peak / 2**20:.0f} MiB to count what meta.json claims"
    assert Session(path).health().lost_steps == 3_000_000 - 8


# ---------------------------------------------------------------- explorer sessions

def test_sessions_lists_the_good_ones_a_line_for_each_bad_one_and_the_buttons(tmp_path, capsys):
    from explorer import cli

    record(tmp_path / "good", buttons=("a", "lt"))
    record(tmp_path / "old", buttons=())
    for name, changes in {"zero": {"chunk_frames": 0}, "strings": {"steps": "many"}, "alt": {"buttons": "alt"},
                          "nokey": {"chunk_frames": ...}}.items():
        edit_meta(record(tmp_path / name), **changes)
    edit_step(record(tmp_path / "nan"), 2, a=[float("nan"), 0, 0, 0, 1])
    edit_step(record(tmp_path / "t"), 2, t="abc")
    args = cli.build_parser().parse_args(["sessions", str(tmp_path)])
    assert args.handler(args) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + 8, lines
    rows = {Path(line.split()[0]).name: line for line in lines[1:]}
    assert "buttons" in lines[0]
    assert "error" not in rows["good"] and " a,lt " in rows["good"] and "complete" in rows["good"]
    assert "error" not in rows["old"] and "  - " in rows["old"]
    for name, field in {"zero": "chunk_frames = 0", "strings": "steps = 'many'", "alt": "buttons = 'alt'",
                        "nokey": "chunk_frames is missing", "nan": "step 2 has a non-finite action",
                        "t": "t = 'abc'"}.items():
        assert "error: " in rows[name] and field in rows[name], rows[name]
    args = cli.build_parser().parse_args(["sessions", "--json", str(tmp_path / "good")])
    args.handler(args)
    assert json.loads(capsys.readouterr().out)["buttons"] == ["a", "lt"]


# ---------------------------------------------------------------- replay: buttons and recorded actions

def small_config(*overrides: str) -> Config:
    return load(None, ["learner.schedule.warmup_steps=0", "learner.schedule.batch_size=8", "learner.schedule.replay_mb=1",
                       "learner.networks.filters=[8, 8]", "learner.networks.feature=16", "learner.networks.hidden=32",
                       "observation.width=16", "observation.height=16", *overrides])


def test_a_replay_under_other_buttons_is_refused_naming_both_and_the_setting(tmp_path):
    from explorer.run.replay import replay_train

    path = record(tmp_path / "s", buttons=("a", "lt"))
    with pytest.raises(SessionError) as err:
        replay_train(small_config("pad.buttons=['b']"), [path], tmp_path / "run")
    assert one_line(err) == (
        f"{path} was recorded with pad.buttons = ['a', 'lt'], but the settings in use have pad.buttons = ['b']: b was "
        "not recorded, and reading it as never pressed would teach that wrongly; replay it with the buttons it "
        """recorded: --set 'pad.buttons=["a", "lt"]'""")
    assert not (tmp_path / "run").exists()
    from explorer.envs.sessions.reader import check_buttons

    session = Session(path)
    check_buttons([session], ("lt",))  # a recorded button left out is dropped: what is read is what was pressed
    check_buttons([session], ("lt", "a"))
    check_buttons([Session(record(tmp_path / "sticks", buttons=()))], ("a",))  # sticks only: buttons released
    with pytest.raises(SessionError, match="evaluate it on sessions recorded with those buttons"):
        from explorer.run.replay import evaluate
        evaluate(small_config("pad.buttons=['a', 'b']"), [path], tmp_path / "nowhere", tmp_path / "eval")


def test_a_step_without_an_action_mid_episode_stops_replay_as_damaged_data_not_a_policy_fault(tmp_path):
    from explorer.run.replay import replay_train

    path = record(tmp_path / "s", n=30, chunk_frames=8, buttons=("a",), shape=(16, 16, 3))
    edit_step(path, 12, a=None)
    with pytest.raises(SessionError) as err:
        replay_train(small_config(), [path], tmp_path / "run")
    message = one_line(err)
    assert message.startswith(f"session {path} step 12 has no recorded action"), message
    assert "policy" not in message and "replay stopped there" in message


# ---------------------------------------------------------------- config

def test_view_strips_without_context_or_wider_than_the_frames_are_refused_at_load():
    with pytest.raises(ConfigError) as err:
        load(None, ["learner.networks.view_strips=4", "learner.networks.context=false"])
    assert one_line(err).count("learner.networks.view_strips = 4 feeds the strips through the context") == 1
    assert "learner.networks.context = true" in str(err.value)
    with pytest.raises(ConfigError, match="learner.networks.view_strips = 20 splits frames 16 pixels wide into more strips"):
        load(None, ["learner.networks.view_strips=20", "observation.width=16"])
    assert load(None, ["learner.networks.view_strips=16", "observation.width=16"]).learner.networks.view_strips == 16
    from explorer.config import check_replay
    with pytest.raises(ConfigError, match="splits frames 8 pixels wide"):  # a replay's frames are the sessions'
        check_replay((16, 8, 3), 3, LearnerConfig(networks=NetworksConfig(view_strips=12)))
