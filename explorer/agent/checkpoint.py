"""Checkpoints in a run directory: TensorFlow objects plus named parts, verified before they are trusted.

``<run>/checkpoints/`` holds, for each kept agent step ``N``:

- ``learner-N.index`` and ``learner-N.data-*``: a ``tf.train.Checkpoint`` of the
  TensorFlow objects (networks, optimisers, entropy weight, update counter, RNG,
  novelty model and normalisers);
- ``state-N/<name>/``: the files of each named :class:`Part` (the replay, the
  agent's counters, noise and RNG states, ...);
- ``checkpoint``: TensorFlow's index of the kept ones, for tools such as
  ``tf.train.latest_checkpoint``. This module does not rely on it: it reads the folder.

A save writes the parts into ``state-N_temp/``, flushes them to disk, renames
the folder to ``state-N/``, then writes the TensorFlow checkpoint: a
``learner-N.index`` never exists without its whole ``state-N/``.

A restore takes the newest checkpoint whose files all read back whole (every
tensor and every part, checksums included), with one warning line naming the
newer ones it skipped and why. Everything is read and checked before anything
in the agent changes; when the checkpoint does not fit the agent, the agent is
left as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import tensorflow as tf

from explorer.core import ExplorerError
from explorer.files import atomic_write, fsync_dir


class CheckpointError(ExplorerError):
    """A checkpoint is missing, damaged, cannot be written, or does not fit the agent."""

    says_what_was_kept = True  # a failed save names the checkpoint kept; a failed restore comes before any run


class PartDamaged(Exception):
    """A part's files are missing, truncated or unreadable: the checkpoint is skipped."""


class PartMismatch(Exception):
    """A part's files are whole but do not fit this agent (other frame sizes, say): the restore stops."""


class Part(Protocol):
    """Something saved beside the TensorFlow checkpoint, in a folder of its own (``state-N/<name>/``)."""

    def save(self, directory: Path) -> None:
        """Write this part's files into ``directory`` (it exists and is empty)."""

    def load(self, directory: Path) -> Callable[[], None]:
        """Read and check the files in ``directory`` without changing anything.

        Returns:
          A function that puts what was read in place; it is called only once every part
          and the TensorFlow objects have been read, and must not fail on good input.

        Raises:
          PartDamaged: a file is missing, truncated or unreadable (the checkpoint is skipped).
          PartMismatch: the files are whole but do not fit this agent (the restore stops).
        """
        ...


_ZIP_MAGIC = b"PK\x03\x04"


class ArraysPart:
    """A part made of named ``numpy`` arrays, kept as one ``.npz`` archive (no pickles; CRC-checked on load).

    Args:
      state: returns the arrays to save.
      put: takes the arrays read back and puts them in place.
      check: raises ``ValueError`` (its message says why) when arrays that read back whole do not
        fit (other shapes, more rows than the buffer holds); called before anything changes.
      validate: raises ``ValueError`` (its message names the array and what is wrong) when arrays
        that read back whole hold what no save writes (keys missing, ids out of range): the
        checkpoint is damaged, and skipped. Called before ``check``.
      filename: the archive's name inside the part's folder.
      lock: held while ``state`` is taken and written, and while ``put`` runs (a replay that
        another thread fills, whose ``state`` returns views of its buffers).
    """

    def __init__(self, state: Callable[[], Mapping[str, np.ndarray]], put: Callable[[dict[str, np.ndarray]], None],
                 check: Callable[[dict[str, np.ndarray]], None] | None = None, filename: str = "arrays.npz",
                 lock: contextlib.AbstractContextManager[Any] | None = None,
                 validate: Callable[[dict[str, np.ndarray]], None] | None = None):
        self.state, self.put, self.check, self.filename = state, put, check, filename
        self.validate = validate
        self.lock = lock if lock is not None else contextlib.nullcontext()

    def save(self, directory: Path) -> None:
        with self.lock:
            arrays: dict[str, Any] = dict(self.state())
            np.savez(directory / self.filename, **arrays)

    def load(self, directory: Path) -> Callable[[], None]:
        path = directory / self.filename
        try:
            with open(path, "rb") as f:
                if f.read(4) != _ZIP_MAGIC:
                    raise PartDamaged(f"{path.name} is not an .npz archive (empty, truncated or overwritten)")
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}  # reads every member whole, checking its CRC
        except FileNotFoundError:
            raise PartDamaged(f"{path.name} is missing") from None
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as err:
            raise PartDamaged(f"{path.name} is damaged ({type(err).__name__}: {_first_line(err)})") from None
        _checked(path, arrays, self.validate, self.check)

        def commit() -> None:
            with self.lock:
                self.put(arrays)

        return commit


class JsonPart:
    """A part that is one JSON document (counters, RNG states, small lists).

    Args:
      state: returns the JSON-serialisable value to save.
      put: takes the value read back and puts it in place.
      check: raises ``ValueError`` when a value that reads back whole does not fit (was saved
        under other settings).
      validate: raises ``ValueError`` (its message names the field and what is wrong) when a value
        that reads back whole holds what no save writes (a count as text, a negative step, a list
        of the wrong length): the checkpoint is damaged, and skipped. Called before ``check``.
      filename: the file's name inside the part's folder.
    """

    def __init__(self, state: Callable[[], Any], put: Callable[[Any], None],
                 check: Callable[[Any], None] | None = None, filename: str = "state.json",
                 validate: Callable[[Any], None] | None = None):
        self.state, self.put, self.check, self.filename = state, put, check, filename
        self.validate = validate

    def save(self, directory: Path) -> None:
        (directory / self.filename).write_text(json.dumps(self.state()), encoding="utf-8")

    def load(self, directory: Path) -> Callable[[], None]:
        path = directory / self.filename
        try:
            value = json.loads(path.read_bytes().decode("utf-8"))
        except FileNotFoundError:
            raise PartDamaged(f"{path.name} is missing") from None
        except (OSError, ValueError) as err:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            raise PartDamaged(f"{path.name} is damaged ({type(err).__name__}: {_first_line(err)})") from None
        _checked(path, value, self.validate, self.check)
        return lambda: self.put(value)


def _checked(path: Path, value: Any, validate: Callable[[Any], None] | None,
             check: Callable[[Any], None] | None) -> None:
    """Run a part's ``validate`` (damage: :class:`PartDamaged`), then its ``check`` (:class:`PartMismatch`)."""
    if validate is not None:
        try:
            validate(value)
        except (ValueError, TypeError, KeyError, IndexError, OverflowError) as err:
            raise PartDamaged(f"{path.name} holds a bad value: {_first_line(err)}") from None
    if check is not None:
        try:
            check(value)
        except ValueError as err:
            raise PartMismatch(f"{path.name}: {err}") from None


_NAME = re.compile(r"learner-(\d+)(?:\.index)?")
_FILE = re.compile(r"learner-(\d+)\.(index|data-\d+-of-\d+)")
_STATE = re.compile(r"state-(\d+)")
_PART_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class Checkpointer:
    """Saves and restores TensorFlow objects and named parts under ``directory``.

    Args:
      directory: where checkpoints go (``<run>/checkpoints``).
      tf_items: objects for ``tf.train.Checkpoint`` (Keras models, optimisers, variables, nested
        checkpoints), by name; the names are part of the checkpoint format.
      parts: what lives outside TensorFlow, by folder name (``state-N/<name>/``).
      keep: how many checkpoints to keep.
      explain: says which settings differ between the run that wrote the checkpoints and the
        agent (``pad.buttons = ["a"] (in use: ["b"])``, with the fix), or None when it finds none;
        used in the message when a checkpoint does not fit.
    """

    def __init__(self, directory: str | Path, tf_items: Mapping[str, Any], parts: Mapping[str, Part], keep: int = 2,
                 explain: Callable[[], str | None] | None = None):
        bad = [n for n in parts if not _PART_NAME.fullmatch(n) or n.endswith("_temp")]
        if bad:
            raise ValueError(f"part names must be plain folder names, got {bad}")
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.directory = Path(directory)
        self._tf_items = dict(tf_items)
        self.checkpoint = tf.train.Checkpoint(**tf_items)
        self.parts = dict(parts)
        self.keep = keep
        self.explain = explain
        #: set when a save failed (a full disk): the run stops, and its way out does not try again
        self.failed = False
        self._resumed_from: int | None = None  # the step restored, until a save has pruned what came after it

    # ------------------------------------------------------------ save

    def save(self, step: int) -> str:
        """Write a checkpoint for agent step ``step``; returns its path prefix (``.../learner-<step>``).

        Older checkpoints beyond ``keep``, and any of a later step (left by a run that was
        resumed from before them), are removed once this one is whole.

        Raises:
          CheckpointError: it could not be written (a full disk, a folder gone); what it had
            written is removed, and the checkpoints written before stay as they were.
        """
        prefix = self.directory / f"learner-{step}"
        stage, final = self.directory / f"state-{step}_temp", self.directory / f"state-{step}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._remove_temp()
            stage.mkdir()
            for name, part in self.parts.items():
                (stage / name).mkdir()
                part.save(stage / name)
            _fsync_tree(stage)
            self._remove_step(step)  # one of the same step from an abandoned later run
            os.replace(stage, final)
            fsync_dir(self.directory)
            self.checkpoint.write(str(prefix))
            for path in self._tf_files(step):
                _fsync_file(path)
            fsync_dir(self.directory)
        except (OSError, tf.errors.OpError) as err:
            self.failed = True
            self._clean_failed(step)
            reason = getattr(err, "strerror", None) or _first_line(err)
            latest = self.latest
            kept = (f"The last checkpoint written, {latest}, is kept: explorer explore --resume "
                    f"{self.directory.parent} continues from it" if latest is not None
                    else "No checkpoint of this run was written before, so it cannot be resumed: start it again "
                         "once there is space")
            raise CheckpointError(
                f"could not write the checkpoint of step {step} in {self.directory}: {reason}. Each checkpoint holds "
                f"the replay (up to learner.schedule.replay_mb MiB); free space there, or lower learner.schedule.replay_mb. "
                f"{kept}") from err
        except BaseException:
            self.failed = True
            self._clean_failed(step)
            raise
        self._prune(step)
        self._resumed_from = None
        return str(prefix)

    @property
    def latest(self) -> str | None:
        """Path prefix of the newest checkpoint with all its files present (not yet verified), or None."""
        return latest_checkpoint(self.directory)

    def _clean_failed(self, step: int) -> None:
        shutil.rmtree(self.directory / f"state-{step}_temp", ignore_errors=True)
        self._remove_step(step)
        self._remove_temp()

    def _remove_temp(self) -> None:
        """Remove folders a save left half-written (ours, and TensorFlow's ``learner-N_temp``)."""
        if self.directory.is_dir():
            for path in self.directory.glob("*_temp*"):
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)

    def _remove_step(self, step: int) -> None:
        for path in self._tf_files(step):
            path.unlink(missing_ok=True)
        shutil.rmtree(self.directory / f"state-{step}", ignore_errors=True)

    def _prune(self, newest: int) -> None:
        # after a resume from step R, those after R (skipped as damaged, or of the history the resume
        # left) are not this run's: the new one and those up to R are kept
        ours = [s for s in self._complete_steps()
                if s <= newest and (self._resumed_from is None or s <= self._resumed_from or s == newest)]
        kept = ours[-self.keep:]
        for step in self._steps_on_disk():
            if step not in kept:
                self._remove_step(step)
        text = "".join([f'model_checkpoint_path: "learner-{kept[-1]}"\n',
                        *(f'all_model_checkpoint_paths: "learner-{s}"\n' for s in kept)])
        with contextlib.suppress(OSError):  # TensorFlow's index is a courtesy; the folder is the truth
            atomic_write(self.directory / "checkpoint", text)

    # ------------------------------------------------------------ what is on disk

    def _tf_files(self, step: int) -> list[Path]:
        return _tf_files(self.directory, step)

    def _steps_on_disk(self) -> list[int]:
        return _steps_on_disk(self.directory)

    def _complete_steps(self) -> list[int]:
        return _complete_steps(self.directory)

    # ------------------------------------------------------------ restore

    def restore(self, path: str | Path | None = None) -> int:
        """Restore ``path`` (``<directory>/learner-N``), or else the newest whole checkpoint; returns its agent step.

        Newer checkpoints that are damaged or incomplete are skipped with one warning line on
        stderr. Nothing changes in the agent unless the restore succeeds.

        Raises:
          CheckpointError: there is none; none is whole (each is named with what is wrong);
            ``path`` is damaged; or the checkpoint does not fit the agent (other network
            sizes or observations).
        """
        if path is not None:
            m = _NAME.fullmatch(Path(path).name)
            if m is None:
                raise CheckpointError(f"{path} is not a checkpoint: give <run>/checkpoints/learner-N or a run directory")
            candidates = [int(m.group(1))]
        else:
            candidates = self._steps_on_disk()[::-1]
            if not candidates:
                raise CheckpointError(f"no checkpoint in {self.directory}: nothing to resume")
        skipped: list[tuple[int, str]] = []
        try:
            for step in candidates:
                try:
                    commits = self._read(step)
                except PartDamaged as err:
                    skipped.append((step, str(err)))
                    continue
                self._apply(step, commits)
                self._resumed_from = step
                return step
        finally:
            if skipped and len(skipped) < len(candidates):  # one line, whatever happens next
                print(f"explorer: skipped checkpoint{'s' if len(skipped) > 1 else ''} in {self.directory}: "
                      + ", ".join(f"learner-{s} ({why})" for s, why in skipped)
                      + f"; using learner-{candidates[len(skipped)]}", file=sys.stderr)
        if path is not None:
            raise CheckpointError(f"checkpoint {path} cannot be used: {skipped[0][1]}")
        raise CheckpointError(f"no usable checkpoint in {self.directory}: "
                              + ", ".join(f"learner-{s} ({why})" for s, why in skipped)
                              + "; nothing can be resumed from it; start a new run")

    def _read(self, step: int) -> dict[str, Callable[[], None]]:
        """Read every file of checkpoint ``step`` and check it is whole; change nothing.

        Raises:
          PartDamaged: a file is missing, truncated or unreadable (the message says which).
          CheckpointError: a part does not fit this agent.
        """
        prefix = self.directory / f"learner-{step}"
        if not Path(f"{prefix}.index").is_file():
            raise PartDamaged(f"learner-{step}.index is missing")
        try:
            reader = tf.train.load_checkpoint(str(prefix))
            for key in reader.get_variable_to_dtype_map():
                reader.get_tensor(key)  # reads every tensor, checking its checksum
        except Exception as err:  # TensorFlow reports damage as OpError, IndexError, ValueError, ...
            raise PartDamaged(f"learner-{step} is damaged: {_first_line(err)}") from None
        side = self.directory / f"state-{step}"
        if not side.is_dir():
            raise PartDamaged(f"{side.name}/ is missing")
        commits = {}
        for name, part in self.parts.items():
            try:
                commits[name] = part.load(side / name)
            except PartDamaged as err:
                raise PartDamaged(f"{side.name}/{name}/{err}") from None
            except PartMismatch as err:
                raise self._mismatch(prefix, f"{side.name}/{name}/{err}") from None
        return commits

    def _apply(self, step: int, commits: Mapping[str, Callable[[], None]]) -> None:
        """Restore the TensorFlow objects of ``step``, then the parts; on any failure put the objects back.

        Raises:
          CheckpointError: the checkpoint does not fit the agent (which is left as it was).
        """
        prefix = self.directory / f"learner-{step}"
        before = _snapshot(self.checkpoint)
        with _quiet_tensorflow():
            failure = self._read_objects(prefix)
        if failure is None:
            try:
                for commit in commits.values():
                    commit()
            except (ValueError, TypeError, KeyError, IndexError) as err:  # a part that does not fit after all
                failure = f"{type(err).__name__}: {_first_line(err)}"
        if failure is not None:
            _put_back(before)
            with _quiet_tensorflow():
                # values of the failed read that found no object wait on the old root (and would
                # warn when it goes): a fresh root drops them
                self.checkpoint = tf.train.Checkpoint(**self._tf_items)
            raise self._mismatch(prefix, failure)

    def _read_objects(self, prefix: Path) -> str | None:
        """Read ``prefix`` into the TensorFlow objects; None when all matched, else why not."""
        try:
            status = self.checkpoint.read(str(prefix))
            status.assert_existing_objects_matched()
            status.expect_partial()  # values no object wants (an older layout) are not an error
        except (AssertionError, ValueError, TypeError, tf.errors.OpError) as err:
            return f"{type(err).__name__}: {_first_line(err)}"
        return None

    def _mismatch(self, prefix: Path, why: str) -> CheckpointError:
        settings = self.directory.parent / "config.toml"
        try:
            differences = self.explain() if self.explain is not None else None
        except Exception as err:  # the explanation is a courtesy: a run's unreadable config.toml says so
            differences = None
            why = f"{why}; {settings} cannot be read ({type(err).__name__}: {_first_line(err)})"
        if differences:
            return CheckpointError(f"checkpoint {prefix} does not fit this agent: {differences}. ({why})")
        if self.explain is not None and settings.is_file():
            return CheckpointError(
                f"checkpoint {prefix} does not fit this agent, although the settings in use match those of its run "
                f"({settings}) in every setting that shapes the networks: it was written by another version of "
                f"explorer, or {settings} was edited after it. ({why})")
        load = f": --config {settings}" if self.explain is None else " (its run has no config.toml to compare)"
        return CheckpointError(
            f"checkpoint {prefix} does not fit this agent: its network sizes or its observations (frame size, "
            f"colour or grey, stack) differ from the settings now in use; to continue that run, load the settings "
            f"it was trained with{load}. ({why})")


# ---------------------------------------------------------------- what is on disk

def latest_checkpoint(directory: str | Path) -> str | None:
    """Path prefix (``<directory>/learner-N``) of the newest checkpoint with all its files present, or None.

    The files are not read: :meth:`Checkpointer.restore` verifies them.
    """
    steps = _complete_steps(Path(directory))
    return str(Path(directory) / f"learner-{steps[-1]}") if steps else None


def _tf_files(directory: Path, step: int) -> list[Path]:
    if not directory.is_dir():
        return []
    return [p for p in directory.glob(f"learner-{step}.*") if (m := _FILE.fullmatch(p.name)) and int(m.group(1)) == step]


def _steps_on_disk(directory: Path) -> list[int]:
    """Agent steps with any checkpoint file or state folder, oldest first."""
    steps = set()
    if directory.is_dir():
        for path in directory.iterdir():
            m = _FILE.fullmatch(path.name) or _STATE.fullmatch(path.name)
            if m:
                steps.add(int(m.group(1)))
    return sorted(steps)


def _complete_steps(directory: Path) -> list[int]:
    """Agent steps whose index, data and state folder are all present, oldest first."""
    out = []
    for step in _steps_on_disk(directory):
        names = {p.name for p in _tf_files(directory, step)}
        if (f"learner-{step}.index" in names and any(".data-" in n for n in names)
                and (directory / f"state-{step}").is_dir()):
            out.append(step)
    return out


# ---------------------------------------------------------------- checks of what parts read back

def validate_rng_state(state: Any, what: str) -> None:
    """Raise ``ValueError`` unless ``state`` is a state numpy's PCG64 takes (``Generator.bit_generator.state``)."""
    if not isinstance(state, dict) or state.get("bit_generator") != "PCG64":
        raise ValueError(f"{what} is not a PCG64 state: {str(state)[:80]}")
    try:
        np.random.PCG64().state = state  # type: ignore[assignment]
    except (ValueError, TypeError, KeyError, OverflowError) as err:
        raise ValueError(f"{what} is not a PCG64 state ({type(err).__name__}: {err})") from None


def first_error(err: Any) -> str:
    """The first problem of a pydantic ``ValidationError`` as ``field = value: what is wrong``."""
    e = err.errors(include_url=False)[0]
    field = ".".join(str(x) for x in e["loc"]) or "the document"
    if e["type"] == "missing":
        return f"{field} is missing"
    shown = repr(e.get("input"))
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"{field} = {shown}: {e['msg'].removeprefix('Value error, ')}"


# ---------------------------------------------------------------- helpers

def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return (text.splitlines()[0] if text else type(err).__name__)[:200]


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def _fsync_tree(root: Path) -> None:
    """Flush every file under ``root`` and every folder's entries to disk (before the folder is renamed in)."""
    for folder, _, files in os.walk(root):
        for name in files:
            _fsync_file(Path(folder) / name)
        fsync_dir(Path(folder))


def _variables(root: tf.train.Checkpoint) -> Iterator[Any]:
    import keras

    seen: set[int] = set()
    for obj in tf.train.TrackableView(root).descendants():
        if isinstance(obj, (tf.Variable, keras.Variable)) and id(obj) not in seen:
            seen.add(id(obj))
            yield obj


def _snapshot(root: tf.train.Checkpoint) -> list[tuple[Any, np.ndarray]]:
    """Every variable reachable from ``root`` with a copy of its value."""
    return [(v, np.array(v.numpy(), copy=True)) for v in _variables(root)]


def _put_back(snapshot: list[tuple[Any, np.ndarray]]) -> None:
    for variable, value in snapshot:
        variable.assign(value)


@contextlib.contextmanager
def _quiet_tensorflow() -> Iterator[None]:
    """Hold back TensorFlow's warnings about a partial restore: the error raised says it all."""
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")
    try:
        yield
    finally:
        import gc
        gc.collect()  # the restore status warns when it is collected; collect it while quiet
        logger.setLevel(level)
