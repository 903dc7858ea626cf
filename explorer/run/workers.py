"""The two halves of ``explore --workers N``, as plain objects (no Ray here).

:mod:`explorer.run.distributed` runs each as a Ray actor; tests and tools can
run them in one process.

A :class:`Worker` owns one game instance and an acting copy of the agent
(policy network, exploration noise, episodic novelty, context, adder). Its
driver loop runs on a thread of its own, the same :class:`~explorer.run.driver.Driver`
as every mode; the adder writes into an :class:`~explorer.agent.outbox.Outbox`.
The worker acts only on steps it was granted: each :meth:`Worker.collect`
returns the batch it was working on and grants the next one, so a worker is
never more than one batch ahead of whoever collects from it (back-pressure,
bounded memory). Published weights arrive with ``collect`` and are installed
on the acting thread before the next decision, never in the middle of a step.

A :class:`LearnerService` owns the replay and the learner. :meth:`LearnerService.add`
stores a worker's batch; a training thread makes one update per
``learner.schedule.update_every`` agent steps taken in (never more: the update-to-data
ratio is a ceiling, and the measured ratio is reported), and publishes the
policy's weights every ``learner.schedule.publish_every`` updates. Its checkpoint is
the single-process run's, so a run resumes with any number of workers.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from explorer.agent.outbox import Batch, Outbox
from explorer.agent.schedule import UpdateSchedule
from explorer.agent.threaded import ThreadedLearner
from explorer.config import Config
from explorer.core import ExplorerError, action_dim, action_stats
from explorer.envs.gym.positions import FrameCell, Position
from explorer.run.assembly import Setup
from explorer.run.coverage import place
from explorer.run.driver import Controls, Driver, Transition


class WorkerError(ExplorerError):
    """A worker's game or acting loop failed; the message says how, on one line."""


@dataclass
class Report:
    """What a worker says about one batch (small: it goes to the coordinator, the batch to the learner).

    Attributes:
      worker: the worker's index. incarnation: tells a restarted worker from the one before.
      steps: agent steps in the batch. transitions: transitions in the batch.
      places: where the player was, as coverage reads it (:func:`~explorer.run.coverage.place`: x/y with
        the room or z where the game has them, or a frame cell where it reports no position): each
        episode's first place, then one per step.
      cell: the coverage cell size of the worker's game, in the places' units.
      ends: an episode ended at ``places[i]`` for each ``i`` here; outcomes: how each ended; end_steps: the
        batch's agent steps up to and including each one's last.
      budget: the agent steps an episode of the worker's game may last (its env's ``episode_budget``; None:
        not said).
      metrics: means over the batch's steps (novelty, action statistics).
      version: the weights version the worker acted with at the end of the batch (-1: none yet).
      seconds: time the batch took to act, seconds; waited: seconds spent waiting for a grant.
      frames: frames in the batch (some are sent twice, see :mod:`explorer.agent.outbox`).
      nbytes: bytes of the batch.
    """

    worker: int
    incarnation: str
    steps: int = 0
    transitions: int = 0
    places: list[Position | FrameCell] = field(default_factory=list)
    cell: float = 64.0
    ends: list[int] = field(default_factory=list)
    end_steps: list[int] = field(default_factory=list)
    budget: int | None = None
    outcomes: list[str | None] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    version: int = -1
    seconds: float = 0.0
    waited: float = 0.0
    frames: int = 0
    nbytes: int = 0
    pid: int = 0
    host: str = ""


class _Stopped(Exception):  # noqa: N818 (a signal that ends the acting thread, not an error)
    """Raised on the acting thread when the worker is asked to stop while it waits for a grant."""


def reach_back(config: Config) -> int:
    """Frames one transition can reach back (an episode start included): what an outbox must keep."""
    learner, stack = config.learner, config.observation.stack
    return 2 * stack + (learner.n_step + 1) * learner.action_repeat - 1


def worker_config(config: Config, index: int) -> Config:
    """The config worker ``index`` runs: its own engine seed and noise seed (one source: the run's)."""
    return config.model_copy(update={
        "game": config.game.model_copy(update={"seed": config.game.seed + index}),
        "learner": config.learner.model_copy(update={"seed": config.learner.seed + 1009 * (index + 1)})})


class Worker:
    """One game instance and an acting copy of the agent; its driver loop runs on a thread.

    Args:
      config: the run's config (the worker derives its seeds with :func:`worker_config`).
      index: which worker this is, from 0.
      fetch: turns what :meth:`collect` is handed as ``weights`` into ``{"policy": [...],
        "novelty": [...]}`` (``ray.get`` on a Ray cluster; by default the value itself).
      own_process: the worker has its process to itself (a Ray actor's): TensorFlow acts on the CPU
        alone, with thread pools of ``run.worker_cpus`` threads (False: the process's are left as they are).
    """

    def __init__(self, config: Config, index: int, fetch: Callable[[Any], Any] | None = None,
                 own_process: bool = False):
        from explorer.envs import make_env

        self.index = index
        self.fetch = fetch or (lambda value: value)
        self.incarnation = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        config = worker_config(config, index)
        self.config = config
        setup = Setup(config)
        threads = max(1, int(config.run.worker_cpus))
        setup.prepare(config.run.seed + 7919 * (index + 1), threads=(threads, threads) if own_process else None,
                      gpu=not own_process)
        self.env = make_env(config)
        self.outbox = Outbox(self.env.frame_shape, config.observation.stack, 0, reach_back(config),
                             action_dim(config.pad.buttons))
        self.agent = setup.acting_agent(self.env.frame_shape, self.outbox)
        self.outbox.ctx_dim = self.agent.context.dim
        self.controls = Controls()
        self.driver = Driver(self.env, self.agent.actor, self.controls)
        self.driver.before_act(self._before_act)
        self.driver.on_reset(self._on_reset)
        self.driver.on_step(self._on_step)
        self._cond = threading.Condition()
        self._grants: deque[int] = deque()  # steps granted for the batches after the current one
        self._left = 0  # steps left in the batch being acted
        self._ready: deque[tuple[Batch, Report]] = deque()
        self._run_steps = 0  # agent steps of the whole run, as the coordinator last said
        self._weights: Any = None  # newest weights handed over, not yet installed
        self._version = -1  # version of the weights being acted with
        self._offered = -1
        self.error: BaseException | None = None
        self._waited = 0.0
        self._started = time.monotonic()
        self._new_batch()
        self._thread = threading.Thread(target=self._run, name=f"worker-{index}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ coordinator side
    def collect(self, grant: int, run_steps: int, version: int, weights: Any) -> tuple[Batch, Report]:
        """Hand over the batch being acted (once it is complete) and grant ``grant`` steps for the next.

        A worker with no batch under way returns an empty batch at once (it has just started, or
        was granted nothing). Weights newer than the ones acted with are fetched now and installed
        before the next decision.

        Args:
          grant: agent steps of the next batch (0: none; the worker idles once this one is done).
          run_steps: agent steps of the run so far, all workers and resumptions included (the
            warm-up is the run's, not each worker's).
          version: the newest weights' version; weights: what ``fetch`` turns into them, or None.

        Raises:
          WorkerError: the game or the acting loop failed.
        """
        if weights is not None and version > self._offered:
            fetched = self.fetch(weights[0])  # a list around the reference, so that it was not fetched on the way
            with self._cond:
                self._weights, self._offered = (version, fetched), version
        with self._cond:
            self._run_steps = max(self._run_steps, run_steps)
            busy = self._left > 0 or bool(self._grants)
            while busy and not self._ready and self.error is None:
                self._cond.wait(0.5)
            self._raise()
            out = self._ready.popleft() if self._ready else self._empty()
            if grant > 0:
                self._grants.append(grant)
                self._cond.notify_all()
        return out

    def stop(self) -> dict[str, Any]:
        """Stop acting (the game ends neutral and closes); returns the env's figures."""
        self.controls.request_stop("stopped")
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout=30.0)
        return {"incarnation": self.incarnation, "alive": self._thread.is_alive()}

    def ping(self) -> str:
        """The incarnation, once the worker is built (a restarted worker answers with a new one)."""
        self._raise()
        return self.incarnation

    def _raise(self) -> None:
        if self.error is not None:
            err = self.error
            raise WorkerError(f"worker {self.index}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")

    def _empty(self) -> tuple[Batch, Report]:
        batch = Batch.empty(self.env.frame_shape, self.config.observation.stack, self.agent.context.dim,
                            action_dim=action_dim(self.config.pad.buttons))
        return batch, Report(self.index, self.incarnation, cell=self.env.cell, budget=self.env.episode_budget,
                             version=self._version, pid=os.getpid(), host=socket.gethostname())

    # ------------------------------------------------------------ acting thread
    def _run(self) -> None:
        try:
            self.driver.run()
        except _Stopped:
            pass
        except BaseException as err:  # surfaced to the coordinator by collect()
            with self._cond:
                self.error = err
                self._cond.notify_all()
        finally:
            self.env.close()

    def _before_act(self) -> None:
        if self._left == 0:
            t0 = time.monotonic()
            with self._cond:
                while not self._grants:
                    if self.controls.stop.is_set():
                        raise _Stopped()
                    self._cond.wait(0.5)
                self._left = self._grants.popleft()
            self._waited += time.monotonic() - t0
            self._started = time.monotonic()
        with self._cond:
            weights, self._weights = self._weights, None
            run_steps = self._run_steps
        if weights is not None:  # between two decisions, on the acting thread
            version, values = weights
            self.agent.actor.set_weights(values["policy"])
            self.agent.novelty.set_learned_weights(values["novelty"])
            self._version = version
        actor = self.agent.actor
        # The warm-up counts the run's steps over all workers (the actor counts its own on top).
        actor.steps = max(actor.steps, run_steps)

    def _new_batch(self) -> None:
        self._places: list[Position | FrameCell] = []
        self._ends: list[int] = []
        self._end_steps: list[int] = []
        self._outcomes: list[str | None] = []
        self._sums: dict[str, float] = {}
        self._count = 0
        self._waited = 0.0

    def _on_reset(self, step: Any) -> None:
        self._places.append(place(step.info["position"]))

    def _on_step(self, t: Transition) -> None:
        self._places.append(place(t.next_step.info["position"]))
        if t.next_step.last:  # here, not on_episode: the batch may be shipped before the driver calls that
            self._ends.append(len(self._places) - 1)
            self._end_steps.append(self._count + 1)  # this step included
            self._outcomes.append(self.env.outcome)
        for k, v in t.metrics.items():
            self._sums[k] = self._sums.get(k, 0.0) + float(v)
        if t.action is not None:
            for k, v in action_stats(t.action[None], self.config.pad.buttons).items():
                self._sums[k] = self._sums.get(k, 0.0) + v
        self._count += 1
        shipped = self._pack() if self._left == 1 else None
        with self._cond:  # one step under the lock: collect() never sees a batch done but not yet ready
            self._left -= 1
            if shipped is not None:
                self._ready.append(shipped)
                self._cond.notify_all()
        if shipped is not None:
            self._new_batch()

    def _pack(self) -> tuple[Batch, Report]:
        batch = self.outbox.take(self._count)
        report = Report(self.index, self.incarnation, steps=self._count, transitions=len(batch),
                        places=self._places, cell=self.env.cell, ends=self._ends, end_steps=self._end_steps,
                        budget=self.env.episode_budget,
                        outcomes=self._outcomes, metrics={k: v / self._count for k, v in self._sums.items()},
                        version=self._version, seconds=time.monotonic() - self._started, waited=self._waited,
                        frames=len(batch.frames), nbytes=batch.nbytes, pid=os.getpid(), host=socket.gethostname())
        return batch, report


class LearnerService:
    """The replay and the learner of ``explore --workers N``, with its training thread and checkpoints.

    Args:
      config: the run's config.
      run_path: the run directory (checkpoints go to ``<run>/checkpoints``); it must be visible
        where this object lives.
      frame_shape: ``(H, W, C)`` of the workers' frames.
      resume: restore the latest checkpoint of the run first.
      publish: turns ``{"policy": [...], "novelty": [...]}`` into what workers are handed
        (``ray.put`` on a Ray cluster: one copy per publication, however many workers fetch it).
      gpu: False hides the GPUs from TensorFlow (the learner's process is a Ray actor's on a node without one).
    """

    def __init__(self, config: Config, run_path: str | Path, frame_shape: tuple[int, int, int], resume: bool = False,
                 publish: Callable[[Any], Any] | None = None, gpu: bool = True):
        run_path = Path(run_path)
        if not (run_path / "config.toml").is_file():
            raise ExplorerError(f"the learner runs on {socket.gethostname()}, where run directory {run_path} is not "
                                f"visible: put run.dir on a filesystem every node of the cluster shares, or run "
                                f"explorer explore on the node the learner runs on")
        setup = Setup(config, run_path)
        setup.prepare(config.run.seed, eager=config.run.eager, gpu=gpu)
        self.config = config
        self.agent = setup.learning_agent(frame_shape, restore=run_path if resume else None)
        self.checkpointer = setup.checkpointer
        self.start = self.agent.actor.steps  # agent steps of the run before this session
        self.steps = self.start  # agent steps taken in, resumptions included
        self.transitions = 0
        self.frames = 0
        self.batches = 0
        self.by_worker: dict[int, int] = {}
        self.merge_seconds = 0.0
        self.first_updates = int(self.agent.learner.updates.numpy())
        self.publish = publish or (lambda value: value)
        self.version = 0
        self.published = [self.publish(self._weights())]
        self.gpus = _gpus()
        self._window: dict[str, list[float]] = {}
        self.schedule = UpdateSchedule.from_config(config.learner)
        self.trainer = ThreadedLearner(self.agent.learner, self.schedule, steps=lambda: self.steps, margin=(0, 0),
                                       done=self.first_updates, weights=self._weights, on_publish=self._publish,
                                       on_update=self._add_metrics).start()

    def _weights(self) -> dict[str, list[np.ndarray]]:
        return {"policy": self.agent.learner.get_weights(), "novelty": self.agent.novelty.get_learned_weights()}

    @property
    def updates(self) -> int:
        """Updates made, resumptions included."""
        return self.trainer.updates

    @property
    def error(self) -> BaseException | None:
        """Why the training thread stopped, if it failed."""
        return self.trainer.error

    def target(self, steps: int | None = None) -> int:
        """Updates allowed after ``steps`` agent steps (default: those taken in): the schedule's, as a
        single-process run makes them (:meth:`UpdateSchedule.allowed`)."""
        return self.schedule.allowed(self.steps if steps is None else steps) or 0

    def _publish(self, weights: dict[str, list[np.ndarray]]) -> None:
        self.published = [self.publish(weights)]
        self.version += 1

    def _add_metrics(self, metrics: dict[str, float]) -> None:
        for k, v in metrics.items():
            self._window.setdefault(k, []).append(v)

    # ------------------------------------------------------------ coordinator side
    def add(self, batch: Batch, worker: int) -> dict[str, Any]:
        """Store a worker's batch in replay; returns :meth:`status`."""
        t0 = time.perf_counter()
        self.agent.replay.extend(batch)
        self.merge_seconds += time.perf_counter() - t0
        self.steps += batch.steps
        self.transitions += len(batch)
        self.frames += len(batch.frames)
        self.batches += 1
        self.by_worker[worker] = self.by_worker.get(worker, 0) + len(batch)
        self.trainer.wake()
        return self.status()

    def status(self, metrics: bool = False) -> dict[str, Any]:
        """Counters (steps and transitions taken in, updates, the newest weights and their version);
        with ``metrics``, also the means of the update metrics since the last such call.

        Raises:
          ExplorerError: the training thread failed (a diverged loss, say).
        """
        if self.error is not None:
            err = self.error
            raise ExplorerError(f"the learner stopped after {self.updates} updates: {type(err).__name__}: "
                                f"{str(err).splitlines()[0] if str(err) else ''}")
        out: dict[str, Any] = {"steps": self.steps, "start": self.start, "transitions": self.transitions,
                               "frames": self.frames, "batches": self.batches, "updates": self.updates,
                               "version": self.version, "weights": self.published, "by_worker": dict(self.by_worker),
                               "replay": len(self.agent.replay), "merge_seconds": self.merge_seconds,
                               "train_seconds": self.trainer.train_s, "updates_per_s": self.trainer.stats()["updates_per_s"],
                               "host": socket.gethostname(), "gpu": self.gpus, "rss_mb": _rss_mb()}
        if metrics:
            window, self._window = self._window, {}
            out["metrics"] = {k: float(np.mean(v)) for k, v in window.items()}
        return out

    def save(self) -> str:
        """Checkpoint at the agent steps taken in, between two updates; returns its path prefix."""
        actor = self.agent.actor
        with self.trainer.lock:
            # The actor part holds the run's step count (warm-up, --resume); whoever resumes starts an episode.
            actor.steps, actor.new_episode = self.steps, True
            return self.checkpointer.save(self.steps)

    def stop(self) -> None:
        """Stop training after the current update."""
        self.trainer.stop()


def _rss_mb() -> float:
    """Resident memory of this process, MiB (flat over a run: replay is allocated whole at the start)."""
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _gpus() -> int:
    """GPUs TensorFlow sees in this process."""
    import tensorflow as tf

    return len(tf.config.list_logical_devices("GPU"))
