"""Checkpoints made of TensorFlow objects and named parts: verified on restore, with fallback and no half-writes."""

from __future__ import annotations

import errno
import gc
import json
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import explorer.agent.checkpoint as ck
from explorer.agent.checkpoint import ArraysPart, Checkpointer, CheckpointError, JsonPart

# TensorFlow reports on its devices (no GPU here, say) when it first meets them: let that happen
# now, so the tests below see on stderr only what a restore prints.
tf.config.list_logical_devices()


class World:
    """Small real TensorFlow objects and two parts (arrays and counters), all set from one number."""

    def __init__(self, value: float = 0.0, units: int = 3, rows: int = 4):
        self.dense = keras.layers.Dense(units)
        self.dense.build((None, 2))
        self.scale = tf.Variable(0.0)
        self.nested = tf.train.Checkpoint(w=tf.Variable([0.0, 0.0]))
        self.rows = rows
        self.arrays = {"frames": np.zeros((rows, 2), np.uint8)}
        self.counters = {"steps": 0}
        self.set(value)

    def set(self, value: float) -> None:
        self.dense.kernel.assign(np.full(self.dense.kernel.shape, value, np.float32))
        self.scale.assign(value)
        self.nested.w.assign([value, -value])
        self.arrays = {"frames": np.full((self.rows, 2), int(value) % 256, np.uint8)}
        self.counters = {"steps": int(value)}

    def values(self) -> dict:
        return {"kernel": self.dense.kernel.numpy().tolist(), "scale": self.scale.numpy().tolist(),
                "w": self.nested.w.numpy().tolist(), "frames": self.arrays["frames"].tolist(),
                "steps": self.counters["steps"]}

    def put_arrays(self, arrays):
        self.arrays = arrays

    def put_counters(self, counters):
        self.counters = counters

    def check_arrays(self, arrays):
        if arrays["frames"].shape != (self.rows, 2):
            raise ValueError(f"frames are {arrays['frames'].shape}, this agent keeps {(self.rows, 2)}")

    def checkpointer(self, directory, keep=2):
        return Checkpointer(directory, {"dense": self.dense, "scale": self.scale, "nested": self.nested},
                            {"replay": ArraysPart(lambda: self.arrays, self.put_arrays, self.check_arrays),
                             "agent": JsonPart(lambda: self.counters, self.put_counters)}, keep=keep)


def saved(directory, steps=(10, 20, 30)):
    """A checkpoint folder holding ``steps`` (the world set to the step's number at each); returns the values."""
    world = World()
    ckpt = world.checkpointer(directory)
    values = {}
    for step in steps:
        world.set(float(step))
        ckpt.save(step)
        values[step] = world.values()
    return values


def test_save_keeps_the_newest_and_restore_brings_every_part_back(tmp_path):
    values = saved(tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["checkpoint", "learner-20.data-00000-of-00001", "learner-20.index",
                     "learner-30.data-00000-of-00001", "learner-30.index", "state-20", "state-30"]
    assert sorted(str(p.relative_to(tmp_path / "state-30")) for p in (tmp_path / "state-30").rglob("*")) == [
        "agent", "agent/state.json", "replay", "replay/arrays.npz"]
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "learner-30")
    fresh = World()
    assert fresh.checkpointer(tmp_path).restore() == 30
    assert fresh.values() == values[30]
    assert fresh.checkpointer(tmp_path).latest == str(tmp_path / "learner-30")
    assert World().checkpointer(tmp_path).restore(str(tmp_path / "learner-20")) == 20


def _cut(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


DAMAGE = {
    "index truncated": (lambda d: _cut(d / "learner-30.index"), "learner-30 is damaged: "),
    "index garbage": (lambda d: (d / "learner-30.index").write_bytes(b"garbage" * 20), "learner-30 is damaged: "),
    "index empty": (lambda d: (d / "learner-30.index").write_bytes(b""), "learner-30 is damaged: "),
    "index missing (save cut short)": (lambda d: (d / "learner-30.index").unlink(), "learner-30.index is missing"),
    "data truncated": (lambda d: _cut(d / "learner-30.data-00000-of-00001"), "learner-30 is damaged: "),
    "data flipped byte": (lambda d: _flip(d / "learner-30.data-00000-of-00001"), "Checksum does not match"),
    "data missing": (lambda d: (d / "learner-30.data-00000-of-00001").unlink(), "learner-30 is damaged: "),
    "state folder missing": (lambda d: __import__("shutil").rmtree(d / "state-30"), "state-30/ is missing"),
    "npz truncated": (lambda d: _cut(d / "state-30/replay/arrays.npz"),
                      "state-30/replay/arrays.npz is damaged (BadZipFile"),
    "npz flipped byte": (lambda d: _flip(d / "state-30/replay/arrays.npz"), "Bad CRC-32"),
    "npz garbage": (lambda d: (d / "state-30/replay/arrays.npz").write_bytes(b"garbage" * 20),
                    "state-30/replay/arrays.npz is not an .npz archive"),
    "npz empty": (lambda d: (d / "state-30/replay/arrays.npz").write_bytes(b""), "is not an .npz archive"),
    "npz missing": (lambda d: (d / "state-30/replay/arrays.npz").unlink(), "state-30/replay/arrays.npz is missing"),
    "json truncated": (lambda d: _cut(d / "state-30/agent/state.json"),
                       "state-30/agent/state.json is damaged (JSONDecodeError"),
    "json not utf-8": (lambda d: (d / "state-30/agent/state.json").write_bytes(b'{"steps": "\xff"}'),
                       "state-30/agent/state.json is damaged (UnicodeDecodeError"),
    "json missing": (lambda d: (d / "state-30/agent/state.json").unlink(), "state-30/agent/state.json is missing"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before_with_one_warning(tmp_path, capfd, caplog, damage):
    values = saved(tmp_path)
    spoil, reason = DAMAGE[damage]
    spoil(tmp_path)
    capfd.readouterr()
    world = World()
    assert world.checkpointer(tmp_path).restore() == 20
    assert world.values() == values[20]
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err  # nothing else from TensorFlow either
    assert err.startswith(f"explorer: skipped checkpoint in {tmp_path}: learner-30 (")
    assert reason in err and err.endswith("); using learner-20")
    assert tensorflow_warnings(caplog) == []


def test_a_garbage_tensorflow_index_file_hides_nothing_and_is_rewritten(tmp_path, capfd):
    values = saved(tmp_path)
    (tmp_path / "checkpoint").write_bytes(b"\x00garbage{{{")
    world = World()
    ckpt = world.checkpointer(tmp_path)
    assert ckpt.latest == str(tmp_path / "learner-30")
    assert ckpt.restore() == 30 and world.values() == values[30]
    assert capfd.readouterr().err == ""
    ckpt.save(40)
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "learner-40")
    assert sorted(p.name for p in tmp_path.glob("state-*")) == ["state-30", "state-40"]


def test_when_no_checkpoint_is_whole_the_error_says_why_for_each_and_nothing_changes(tmp_path, capfd):
    saved(tmp_path)
    _cut(tmp_path / "learner-30.data-00000-of-00001")
    (tmp_path / "state-20/agent/state.json").write_text("{")
    world = World(7.0)
    before = world.values()
    with pytest.raises(CheckpointError) as err:
        world.checkpointer(tmp_path).restore()
    message = str(err.value)
    assert message.startswith(f"no usable checkpoint in {tmp_path}: learner-30 (learner-30 is damaged: ")
    assert "learner-20 (state-20/agent/state.json is damaged (JSONDecodeError" in message
    assert message.endswith("; nothing can be resumed from it; start a new run")
    assert "\n" not in message and "network sizes" not in message
    assert world.values() == before
    assert capfd.readouterr().err == ""  # the error says it all; no warning line besides


def tensorflow_warnings(caplog):
    """What TensorFlow logged (under pytest its logger hands records to pytest, not to stderr)."""
    return [r.getMessage() for r in caplog.records if r.name == "tensorflow"]


def test_an_intact_checkpoint_that_does_not_fit_leaves_the_agent_as_it_was(tmp_path, capfd, caplog):
    saved(tmp_path)
    wider = World(5.0, units=4)  # the kernel differs; the other variables would fit
    before = wider.values()
    with pytest.raises(CheckpointError) as err:
        wider.checkpointer(tmp_path).restore()
    assert str(err.value).startswith(f"checkpoint {tmp_path / 'learner-30'} does not fit this agent: its network sizes")
    assert f"--config {tmp_path.parent / 'config.toml'}. (ValueError: " in str(err.value)
    assert wider.values() == before
    # TensorFlow restores the kernel and the nested variable before it meets the misfit: they are put back
    misfit = World(5.0)
    misfit.scale = tf.Variable([5.0, 5.0])
    before = misfit.values()
    with pytest.raises(CheckpointError, match="does not fit this agent"):
        misfit.checkpointer(tmp_path).restore()
    assert misfit.values() == before
    # a checkpoint with values no object wants (an older layout), read by a misfit and by a fit agent
    for scale in (tf.Variable([5.0, 5.0]), tf.Variable(5.0)):
        fewer = Checkpointer(tmp_path, {"dense": misfit.dense, "scale": scale},
                             {"replay": ArraysPart(lambda: {}, misfit.put_arrays),
                              "agent": JsonPart(dict, misfit.put_counters)})
        try:
            fewer.restore()
        except CheckpointError:
            assert scale.shape == (2,)
        del fewer
        gc.collect()
    assert float(scale.numpy()) == 30.0
    assert capfd.readouterr().err == ""
    assert tensorflow_warnings(caplog) == []  # none of TensorFlow's about the partial restores either
    more_rows = World(5.0, rows=6)  # the networks fit; the replay's frames do not
    before = more_rows.values()
    with pytest.raises(CheckpointError, match=r"does not fit this agent: .* \(state-30/replay/arrays.npz: frames are "
                       r"\(4, 2\), this agent keeps \(6, 2\)\)"):
        more_rows.checkpointer(tmp_path).restore()
    assert more_rows.values() == before


def test_a_part_that_fails_to_go_in_puts_the_networks_back(tmp_path):
    saved(tmp_path)
    world = World(5.0)
    before = world.values()
    ckpt = world.checkpointer(tmp_path)

    def refuses(arrays):
        raise ValueError("could not broadcast input array from shape (4,2) into shape (3,2)")

    ckpt.parts["replay"] = ArraysPart(lambda: world.arrays, refuses)
    with pytest.raises(CheckpointError, match=r"does not fit this agent.*\(ValueError: could not broadcast"):
        ckpt.restore()
    assert world.values() == before


def test_no_checkpoint_and_a_damaged_named_checkpoint_are_clear_errors(tmp_path):
    with pytest.raises(CheckpointError, match=f"^no checkpoint in {tmp_path / 'none'}: nothing to resume$"):
        World().checkpointer(tmp_path / "none").restore()
    saved(tmp_path)
    _cut(tmp_path / "state-30/replay/arrays.npz")
    with pytest.raises(CheckpointError, match=r"^checkpoint .*learner-30 cannot be used: state-30/replay/arrays.npz "
                       r"is damaged \(BadZipFile"):
        World().checkpointer(tmp_path).restore(str(tmp_path / "learner-30"))  # the one asked for, no other
    with pytest.raises(CheckpointError, match=r"^checkpoint .*learner-99 cannot be used: learner-99.index is missing$"):
        World().checkpointer(tmp_path).restore(tmp_path / "learner-99")
    with pytest.raises(CheckpointError, match="is not a checkpoint: give <run>/checkpoints/learner-N"):
        World().checkpointer(tmp_path).restore(tmp_path / "state-30")


def test_a_full_disk_while_saving_parts_keeps_the_last_checkpoint_and_leaves_no_half(tmp_path, monkeypatch):
    world = World(1.0)
    ckpt = world.checkpointer(tmp_path / "run" / "checkpoints")
    ckpt.save(10)
    savez = np.savez

    def fill_the_disk(path, **arrays):
        Path(path).write_bytes(b"PK\x03\x04 half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ck.np, "savez", fill_the_disk)
    world.set(2.0)
    with pytest.raises(CheckpointError) as err:
        ckpt.save(20)
    folder = tmp_path / "run" / "checkpoints"
    assert str(err.value) == (
        f"could not write the checkpoint of step 20 in {folder}: No space left on device. Each checkpoint holds the "
        f"replay (up to learner.schedule.replay_mb MiB); free space there, or lower learner.schedule.replay_mb. The last checkpoint "
        f"written, {folder / 'learner-10'}, is kept: explorer explore --resume {tmp_path / 'run'} continues from it")
    assert ckpt.failed
    assert sorted(p.name for p in folder.iterdir()) == [
        "checkpoint", "learner-10.data-00000-of-00001", "learner-10.index", "state-10"]
    monkeypatch.setattr(ck.np, "savez", savez)
    fresh = World()
    assert fresh.checkpointer(folder).restore() == 10 and fresh.values()["scale"] == 1.0


def test_a_full_disk_while_tensorflow_writes_cleans_its_temp_folder(tmp_path):
    world = World(1.0)
    ckpt = world.checkpointer(tmp_path)
    ckpt.save(10)
    write = ckpt.checkpoint.write

    def fill_the_disk(prefix, options=None):
        Path(f"{prefix}_temp").mkdir()  # where TensorFlow writes shards before merging them
        Path(f"{prefix}_temp/part-00000-of-00001.data-00000-of-00001").write_bytes(b"half")
        raise tf.errors.ResourceExhaustedError(None, None, f"{prefix}_temp; No space left on device")

    ckpt.checkpoint.write = fill_the_disk
    with pytest.raises(CheckpointError, match="could not write the checkpoint of step 20 .*No space left on device"):
        ckpt.save(20)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "checkpoint", "learner-10.data-00000-of-00001", "learner-10.index", "state-10"]
    ckpt.checkpoint.write = write
    assert World().checkpointer(tmp_path).restore() == 10


def test_leftovers_of_a_killed_save_are_ignored_then_removed(tmp_path, capfd):
    values = saved(tmp_path, steps=(10,))
    (tmp_path / "learner-20_temp").mkdir()  # TensorFlow's shards of a save that never merged
    (tmp_path / "learner-20_temp" / "part-00000-of-00001.index").write_bytes(b"x")
    (tmp_path / "state-20_temp" / "replay").mkdir(parents=True)  # parts of a save that never finished
    world = World()
    ckpt = world.checkpointer(tmp_path)
    assert ckpt.restore() == 10 and world.values() == values[10]
    assert capfd.readouterr().err == ""
    ckpt.save(11)
    assert not list(tmp_path.glob("*_temp*"))


def test_a_save_after_resuming_from_an_older_checkpoint_drops_the_abandoned_newer_ones(tmp_path, capfd):
    saved(tmp_path)
    _flip(tmp_path / "learner-30.data-00000-of-00001")
    world = World()
    ckpt = world.checkpointer(tmp_path)
    assert ckpt.restore() == 20
    world.set(25.0)
    ckpt.save(25)
    assert sorted(p.name for p in tmp_path.glob("state-*")) == ["state-20", "state-25"]
    assert not list(tmp_path.glob("learner-30*"))
    capfd.readouterr()
    assert World().checkpointer(tmp_path).restore() == 25
    assert capfd.readouterr().err == ""


def test_a_resume_past_a_damaged_checkpoint_does_not_keep_it_over_the_good_one(tmp_path, capfd):
    saved(tmp_path)
    _flip(tmp_path / "learner-30.data-00000-of-00001")
    world = World()
    ckpt = world.checkpointer(tmp_path)
    assert ckpt.restore() == 20
    world.set(35.0)
    ckpt.save(35)  # past the damaged one: it is not this run's, and the good one it fell back to stays
    assert sorted(p.name for p in tmp_path.glob("state-*")) == ["state-20", "state-35"]
    assert not list(tmp_path.glob("learner-30*"))
    world.set(40.0)
    ckpt.save(40)  # from here on, the newest two as ever
    assert sorted(p.name for p in tmp_path.glob("state-*")) == ["state-35", "state-40"]
    capfd.readouterr()


def test_part_names_are_plain_folder_names(tmp_path):
    with pytest.raises(ValueError, match="plain folder names"):
        Checkpointer(tmp_path, {}, {"../escape": JsonPart(dict, print)})


def test_json_part_round_trips_a_value(tmp_path):
    got = []
    part = JsonPart(lambda: {"steps": 3, "rng": [1, 2]}, got.append)
    part.save(tmp_path)
    assert json.loads((tmp_path / "state.json").read_text()) == {"steps": 3, "rng": [1, 2]}
    commit = part.load(tmp_path)
    assert got == []  # loading changes nothing
    commit()
    assert got == [{"steps": 3, "rng": [1, 2]}]


def test_arrays_part_holds_its_lock_while_taking_and_putting_the_arrays(tmp_path):
    import threading

    lock = threading.Lock()
    held = []
    part = ArraysPart(lambda: held.append(lock.locked()) or {"a": np.arange(3)},
                      lambda arrays: held.append((lock.locked(), arrays["a"].tolist())), lock=lock)
    part.save(tmp_path)
    part.load(tmp_path)()
    assert held == [True, (True, [0, 1, 2])]
    assert not lock.locked()
