"""Checkpoints of the learning agent in a run directory, through ``tf.train.CheckpointManager``.

``<run>/checkpoints/`` holds the TensorFlow checkpoints the manager keeps
(networks, optimisers, entropy weight, update counter, RNG, novelty model and
normalisers: ``learner-<step>.*`` and the manager's ``checkpoint`` index) and,
for each, ``state-<step>/`` with what lives outside TensorFlow (the replay
and the agent's counters, noise and RNG states). The side state is written
first, the TensorFlow checkpoint last, so the index never points at a
checkpoint whose side state is missing.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Protocol

import tensorflow as tf

from explorer.core import ExplorerError


class CheckpointError(ExplorerError):
    """A checkpoint is missing or does not fit the agent."""


class Part(Protocol):
    """A named piece of state that lives outside TensorFlow (replay, counters, RNG states)."""

    def save(self, directory: Path) -> None:
        """Write this part's files into ``directory``."""

    def restore(self, directory: Path) -> None:
        """Read what :meth:`save` wrote."""


class Checkpointer:
    """Saves and restores TensorFlow objects and named parts under ``directory``.

    Args:
      directory: where checkpoints go (``<run>/checkpoints``).
      tf_items: networks, optimisers, variables: what ``tf.train.Checkpoint`` tracks.
      parts: named state outside TensorFlow; part ``name`` saves into ``state-<step>/<name>/``.
      keep: how many checkpoints to keep.
    """

    def __init__(self, directory: str | Path, tf_items: dict[str, Any], parts: dict[str, Part], keep: int = 2):
        self.parts = parts
        self.directory = Path(directory)
        self.checkpoint = tf.train.Checkpoint(**tf_items)
        self.manager = tf.train.CheckpointManager(self.checkpoint, str(self.directory), max_to_keep=keep,
                                                  checkpoint_name="learner")
        #: set when a save failed (a full disk): the run stops, and its way out does not try again
        self.failed = False

    def save(self, step: int) -> str:
        """Write a checkpoint for agent step ``step``; returns its path prefix.

        Raises:
          CheckpointError: it could not be written (a full disk, a folder gone); what it had
            written is removed, and the checkpoints written before stay as they were.
        """
        state_dir = self.directory / f"state-{step}"
        try:
            for name, part in self.parts.items():
                part.save(state_dir / name)
            path = self.manager.save(checkpoint_number=step)
        except (OSError, tf.errors.OpError) as err:
            self.failed = True
            shutil.rmtree(state_dir, ignore_errors=True)
            reason = getattr(err, "strerror", None) or str(err).splitlines()[0][:200]
            raise CheckpointError(
                f"could not write the checkpoint of step {step} in {self.directory}: {reason}. Each checkpoint holds "
                f"the replay (up to learner.replay_mb MiB); free space there, or lower learner.replay_mb. The last "
                f"checkpoint written, {self.manager.latest_checkpoint or 'none'}, is kept: explorer explore --resume "
                f"{self.directory.parent} continues from it") from err
        kept = {Path(p).name.rsplit("-", 1)[-1] for p in self.manager.checkpoints}
        for side in self.directory.glob("state-*"):
            if side.name.split("-", 1)[1] not in kept:
                shutil.rmtree(side, ignore_errors=True)
        return path

    @property
    def latest(self) -> str | None:
        return self.manager.latest_checkpoint

    def restore(self, path: str | None = None) -> int:
        """Restore ``path`` (default: the latest); returns its agent step.

        Raises:
          CheckpointError: there is none, or it does not match the agent (other network sizes).
        """
        path = path or self.manager.latest_checkpoint
        if path is None:
            raise CheckpointError(f"no checkpoint in {self.directory}: nothing to resume")
        step = int(Path(path).name.rsplit("-", 1)[-1])
        side = self.directory / f"state-{step}"
        if not side.is_dir():
            raise CheckpointError(f"checkpoint {path} has no {side.name}/ beside it (replay and counters); it cannot be resumed")
        try:
            self.checkpoint.read(path).assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.OpError) as err:
            settings = self.directory.parent / "config.toml"
            raise CheckpointError(
                f"checkpoint {path} does not fit this agent: its network sizes or its observations (frame size, "
                f"colour or grey, stack) differ from the settings now in use; to continue that run, load the settings "
                f"it was trained with: --config {settings}. ({type(err).__name__}: {str(err).splitlines()[0][:200]})") from err
        missing = [name for name in self.parts if not (side / name).is_dir()]
        if missing:
            raise CheckpointError(f"checkpoint {path} lacks {', '.join(missing)} in {side.name}/ (written by an older "
                                  "explorer?); it cannot be resumed: start a new run")
        for name, part in self.parts.items():
            part.restore(side / name)
        return step
