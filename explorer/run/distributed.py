"""``explorer explore --workers N``: many game instances on a Ray cluster feeding one learner.

The Ape-X / acme distributed-actor pattern on Ray: each
:class:`~explorer.run.workers.Worker` is a Ray actor with one game, acting on
the CPU with the newest published weights; one :class:`~explorer.run.workers.LearnerService`
actor holds the replay and trains (on a GPU when the cluster has one). This
process coordinates: it grants each worker its next batch of steps, hands
the finished batch on to the learner (by reference: the frames go from the
worker's node to the learner's, never through here), and keeps coverage,
metrics, checkpoints and the step budget.

Back-pressure, not queues: a worker is at most one batch ahead of its grant,
at most ``max(2, N)`` batches wait for the learner, and grants stop while the
learner is more than ``learner.schedule.lag_steps`` steps behind its update-to-data
ratio. Faults: a worker whose process dies is restarted by Ray, one whose game
fails is killed and restarted the same way (up to ``run.worker_restarts``
times each); the batch it was acting is lost, counted and reported, and its
steps are granted again. Ctrl-C (or SIGTERM) grants nothing more, takes in
the batches under way, stops the workers (their games end neutral) and the
learner, and writes a checkpoint.

Importing this module imports Ray; :mod:`explorer.run.explore` does so only
when ``run.workers > 1``.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray

from explorer.agent.schedule import UpdateSchedule
from explorer.config import Config, frame_shape
from explorer.core import ExplorerError
from explorer.run.assembly import Assembly, continue_run, progress_bar
from explorer.run.coverage import (
    MAP_CELLS,
    Coverage,
    cells_per_budget,
    coverage_summary,
    finish_episode,
)
from explorer.run.driver import Controls
from explorer.run.rundir import RunDir
from explorer.run.safety import SignalStop
from explorer.run.workers import LearnerService, Report, Worker


def _one_line(err: BaseException) -> str:
    """The first line of what went wrong, from the original exception where Ray wrapped one."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        err = cause
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


class RemoteWorker:
    """The Ray actor around a :class:`Worker`: its process to itself (CPU-only TensorFlow), weights fetched
    with ``ray.get``.

    A failure while building the worker (a map that is not there, say) is raised, on one line,
    by every call rather than lost in a dead actor.
    """

    def __init__(self, config: Config, index: int):
        self.worker: Worker | None = None
        self.error = ""
        try:
            self.worker = Worker(config, index, fetch=ray.get, own_process=True)
        except Exception as err:
            self.error = f"worker {index} could not start: {type(err).__name__}: {_one_line(err)}"

    def _get(self) -> Worker:
        if self.worker is None:
            raise ExplorerError(self.error)
        return self.worker

    def collect(self, grant: int, run_steps: int, version: int, weights: Any) -> tuple[Any, Report]:
        return self._get().collect(grant, run_steps, version, weights)

    def ping(self) -> str:
        return self._get().ping()

    def stop(self) -> dict[str, Any]:
        return self.worker.stop() if self.worker is not None else {}


class RemoteLearner:
    """The Ray actor around a :class:`LearnerService`: weights published with ``ray.put``."""

    def __init__(self, config: Config, run_path: str, frame: tuple[int, int, int], resume: bool, gpu: bool):
        self.service: LearnerService | None = None
        self.error = ""
        try:
            self.service = LearnerService(config, run_path, frame, resume=resume, publish=ray.put, gpu=gpu)
        except Exception as err:
            self.error = f"the learner could not start: {_one_line(err)}"

    def _get(self) -> LearnerService:
        if self.service is None:
            raise ExplorerError(self.error)
        return self.service

    def add(self, batch: Any, worker: int) -> dict[str, Any]:
        return self._get().add(batch, worker)

    def status(self, metrics: bool = False) -> dict[str, Any]:
        return self._get().status(metrics)

    def save(self) -> str:
        return self._get().save()

    def stop(self) -> None:
        if self.service is not None:
            self.service.stop()


class Cluster:
    """A connection to Ray for one run: joins ``run.address`` (or ``RAY_ADDRESS``), else starts a local
    cluster sized for the run; :meth:`close` disconnects (and stops the local cluster) unless Ray was
    already connected by the caller."""

    def __init__(self, config: Config):
        # ray.init installs its own SIGTERM/SIGINT handlers (SIGTERM -> sys.exit): keep explorer's, which stop
        # the run at a step and say what was kept, and give them back when Ray disconnects.
        self._handlers = _signal_handlers()
        try:
            self._connect(config)
        finally:
            _restore(self._handlers)

    def _connect(self, config: Config) -> None:
        run = config.run
        self.need_cpus = run.workers * run.worker_cpus + 1
        self.address = run.address or os.environ.get("RAY_ADDRESS", "")
        if self.address == "local":
            self.address = ""  # Ray's word for a cluster of this machine: the one started below
        self.owned = not ray.is_initialized()
        self.temp_dir: str | None = None
        env = {"env_vars": {"TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}}
        if not self.owned:
            self.address = "the connected cluster"
        elif self.address:
            check_address(self.address)  # a wrong address fails here, in seconds, rather than hang in ray.init
            try:
                with _few_gcs_tries():
                    ray.init(address=self.address, logging_level=logging.WARNING, runtime_env=env)
            except (ConnectionError, RuntimeError, ValueError) as err:
                raise ExplorerError(f"cannot join the Ray cluster at {self.address}: {_one_line(err)}; start one with "
                                    f"ray start --head (if it uses token authentication, set RAY_AUTH_MODE=token and "
                                    f"its token here too), or leave run.address and RAY_ADDRESS empty for a local "
                                    f"cluster") from None
        else:
            # Logical CPUs: on a small machine the workers and the learner share its cores.
            cpus = max(os.cpu_count() or 1, math.ceil(self.need_cpus))
            self.temp_dir = _private_temp_dir()
            try:
                with loopback_only():
                    ray.init(address="local", num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING,
                             object_store_memory=_object_store_bytes(config), runtime_env=env,
                             _temp_dir=os.path.join(self.temp_dir, "ray") if self.temp_dir else None)
            except BaseException:
                self._remove_temp_dir()
                raise
            self.address = "local"
        resources = ray.cluster_resources()
        self.cpus = float(resources.get("CPU", 0.0))
        self.gpus = float(resources.get("GPU", 0.0))
        if self.cpus < self.need_cpus:
            self.close()
            raise ExplorerError(f"run.workers = {run.workers} needs {self.need_cpus:g} CPUs of the Ray cluster "
                                f"({run.workers} x run.worker_cpus = {run.worker_cpus:g}, and 1 for the learner), but it "
                                f"has {self.cpus:g}: add nodes (ray start --address=...), or lower run.workers or "
                                f"run.worker_cpus")

    def learner(self, config: Config, run_path: Path, resume: bool) -> Any:
        """The learner actor: on a GPU when the cluster has one."""
        gpu = self.gpus >= 1
        actor = ray.remote(RemoteLearner).options(num_cpus=1, num_gpus=1 if gpu else 0, max_restarts=0,
                                                  name=None)
        return actor.remote(config, str(run_path), frame_shape(config.observation), resume, gpu)

    def worker(self, config: Config, index: int) -> Any:
        """Worker ``index``'s actor, restarted by Ray when its process dies."""
        actor = ray.remote(RemoteWorker).options(num_cpus=config.run.worker_cpus, max_restarts=config.run.worker_restarts,
                                                 max_task_retries=0)
        return actor.remote(config, index)

    def close(self) -> None:
        if self.owned and ray.is_initialized():
            ray.shutdown()
        self._remove_temp_dir()
        _restore(self._handlers)

    def _remove_temp_dir(self) -> None:
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None


#: Ray's switch between a cluster of many machines and Ray on this machine alone (its default on
#: Windows and macOS); read by ``ray._private.services`` each time it picks the node's address
_LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@contextmanager
def loopback_only() -> Iterator[None]:
    """Within it, a local cluster Ray starts listens on 127.0.0.1 only: its GCS, raylet, object manager,
    agents and every worker, and this process's own Ray server.

    On Linux Ray takes the machine's network address as the node's, and its servers then listen on every
    interface; ``ray.init(_node_ip_address="127.0.0.1")`` is turned back into that address. Ray's
    local-only mode gives every server 127.0.0.1: it is switched on for this process (the setting Ray
    reads) and for the processes Ray starts (its environment variable), and put back afterwards.
    A cluster of several machines is started with ``ray start --head`` and joined with ``run.address``
    (docs/scaling.md).
    """
    from ray._private import ray_constants

    saved_env, saved = os.environ.get(_LOCAL_ONLY_ENV), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[_LOCAL_ONLY_ENV] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved
        if saved_env is None:
            os.environ.pop(_LOCAL_ONLY_ENV, None)
        else:
            os.environ[_LOCAL_ONLY_ENV] = saved_env


def _private_temp_dir() -> str | None:
    """A folder only this user can enter, to hold the local cluster's session files: Ray makes its own
    folders world-writable (0777), so they go in ``<this folder>/ray``. Short, as Ray's socket paths
    must be. None on Windows (Ray's default there)."""
    if sys.platform == "win32":
        return None
    root = os.environ.get("RAY_TMPDIR") or ("/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir())
    return tempfile.mkdtemp(prefix="explorer-ray-", dir=root)  # mode 0700


#: Ray's count of tries (about a second apart) to reach a cluster's GCS before ray.init gives up
_GCS_TRIES_ENV, GCS_TRIES = "RAY_gcs_server_port_wait_time_s", 5


@contextmanager
def _few_gcs_tries() -> Iterator[None]:
    """Joining a cluster, ``ray.init`` gives up after :data:`GCS_TRIES` tries instead of Ray's 20 (a server that
    answers as gRPC but is not Ray's GCS); an operator's own ``RAY_gcs_server_port_wait_time_s`` is kept."""
    if _GCS_TRIES_ENV in os.environ:
        yield
        return
    os.environ[_GCS_TRIES_ENV] = str(GCS_TRIES)
    try:
        yield
    finally:
        os.environ.pop(_GCS_TRIES_ENV, None)


#: seconds a cluster's address has to answer in
ADDRESS_TIMEOUT_S = 5.0
#: what an HTTP/2 client says first; a gRPC server (Ray's GCS and its client server) answers with a SETTINGS frame
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def check_address(address: str, timeout: float = ADDRESS_TIMEOUT_S) -> None:
    """Raise a one-line :class:`ExplorerError` naming ``address`` unless a Ray cluster answers there.

    ``ray.init`` retries an address that does not answer for minutes; this tries it once, bounded: the
    name resolved, a TCP connection made and a gRPC server's greeting read, all within ``timeout``
    seconds (with ``RAY_USE_TLS`` the connection alone). ``auto`` is checked at the address Ray finds.
    """
    shown = address
    if address == "auto":
        try:
            from ray._private.services import canonicalize_bootstrap_address
            found = canonicalize_bootstrap_address("auto")
        except Exception:
            found = None
        if found is None:
            return  # ray.init says at once that there is no cluster to find
        address, shown = found, f"auto ({found})"
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ExplorerError(f"--address {shown!r} is not a Ray cluster's address: give host:port as ray start --head "
                            "prints it (e.g. 10.0.0.5:6379), ray://host:10001, or auto")
    tls = os.environ.get("RAY_USE_TLS", "").lower() in ("1", "true")
    outcome: list[str | bytes] = []

    def probe() -> None:
        try:
            with socket.create_connection((host, int(port)), timeout=timeout) as conn:
                if tls:
                    outcome.append(b"")
                    return
                conn.settimeout(timeout)
                conn.sendall(_HTTP2_PREFACE)
                greeting = b""
                while len(greeting) < 9:  # a frame's header: length (3 bytes), type (1), flags, stream
                    part = conn.recv(9 - len(greeting))
                    if not part:
                        break
                    greeting += part
                outcome.append(greeting)
        except TimeoutError:
            outcome.append(f"it did not answer within {timeout:g} s")
        except OSError as err:
            outcome.append(f"{err.strerror or err}")

    thread = threading.Thread(target=probe, name="ray-address-check", daemon=True)
    thread.start()
    thread.join(2 * timeout + 1)  # a name lookup is not bounded by the socket's timeout
    answer = outcome[0] if outcome else f"it did not answer within {2 * timeout + 1:g} s"
    if isinstance(answer, bytes) and (tls or (len(answer) >= 4 and answer[3] == 0x04)):
        return
    why = answer if isinstance(answer, str) else "something answers there, but not a Ray cluster (no gRPC server)"
    raise ExplorerError(f"cannot join the Ray cluster at {shown}: {why}; check the address ray start --head printed "
                        "(--address or run.address), or leave them and RAY_ADDRESS empty for a local cluster")


_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


def _signal_handlers() -> dict[int, Any]:
    """The handlers of the signals Ray takes over, where this thread may read them (the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {int(s): signal.getsignal(s) for s in (getattr(signal, n, None) for n in _SIGNALS) if s is not None}


def _restore(handlers: dict[int, Any]) -> None:
    for signum, handler in handlers.items():
        if handler is not None and signal.getsignal(signum) is not handler:
            signal.signal(signum, handler)


def _object_store_bytes(config: Config) -> int:
    """Object store of a local cluster: room for every batch that can be under way at once, and weights."""
    h, w, c = frame_shape(config.observation)
    batch = (config.run.ship_steps + 4 * config.observation.stack) * (h * w * c + 256)
    return max(128 * 2**20, 8 * config.run.workers * batch)


@dataclass
class _Slot:
    """The coordinator's view of one worker."""

    index: int
    handle: Any
    state: str = "new"  # new -> running; restarting after a failure; gone when out of restarts
    call: tuple[Any, Any] | None = None  # (batch, report) references of the call under way
    ping: Any = None
    granted: int = 0  # steps granted and not yet delivered
    delivered_any: bool = False
    failed_incarnation: str = ""
    incarnation: str = ""
    incarnations: int = 0
    restarts: int = 0
    lost_batches: int = 0
    lost_steps: int = 0
    retry_at: float = 0.0
    deadline: float = 0.0
    steps: int = 0
    episodes: int = 0
    seconds: float = 0.0
    versions: list[int] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage)
    window_steps: int = 0
    window_seconds: float = 0.0


class Coordinator:
    """Grants steps, moves batches to the learner, handles faults, logs; one per run.

    Args:
      config: the run's config. run: its directory (metrics, TensorBoard).
      workers: the worker actors. learner: the learner actor; status: its first status.
      on_report: called with every worker's report as it arrives (tools and tests).
      progress: show a progress bar.
      signals: the run's stop signals: a stop it asks for ends the run once the batches under way are
        taken in (the run's assembly lets the last checkpoint finish on a second one). None: a switch of
        its own, never set.
    """

    def __init__(self, config: Config, run: RunDir, workers: list[Any], learner: Any, status: dict[str, Any],
                 on_report: Callable[[Report], None] | None = None, progress: bool = True,
                 signals: SignalStop | None = None):
        self.config = config
        self.controls = signals.controls if signals is not None else Controls()
        self.run = run
        self.learner = learner
        self.status = status
        self.on_report = on_report
        self.start = int(status["start"])
        self.budget = max(config.run.steps - self.start, 0)
        self.delivered = 0
        self.slots = [_Slot(i, handle) for i, handle in enumerate(workers)]
        self.adds: list[Any] = []
        self.saves: list[Any] = []
        self.status_call: Any = None
        self._next_poll = 0.0
        self.max_adds = max(2, config.run.workers)
        self.stopped_by = "steps"
        self.save_failed = False
        self.status_first = status
        self.schedule = UpdateSchedule.from_config(config.learner)
        self.t0 = time.monotonic()
        self.bytes = 0
        self.frames = 0
        self.transitions = 0
        self._next_log = self._next_multiple(config.run.log_every)
        self._next_save = self._next_multiple(config.learner.schedule.checkpoint_every) if config.learner.schedule.checkpoint_every else None
        self._window = (time.monotonic(), self.start, int(status["updates"]), 0)
        self._episodes_total = 0
        self.episode_cells: list[int] = []  # cells of each finished episode, every worker's, in the order they ended
        self.episode_lengths: list[int] = []  # agent steps of each of those episodes
        self.episode_outcomes: list[str | None] = []  # and how each ended
        self.episode_budget = config.game.episode_steps  # the steps an episode may last, as the workers' games say
        self.bar = progress_bar(config.run.steps, progress, initial=self.start)

    def _next_multiple(self, every: int) -> int:
        return (self.start // every + 1) * every

    @property
    def run_steps(self) -> int:
        """Agent steps of the run delivered so far, resumptions included."""
        return self.start + self.delivered

    # ------------------------------------------------------------ the loop
    def loop(self, max_seconds: float | None = None) -> None:
        """Run until the step budget is delivered (or every worker is gone); after ``max_seconds``, or
        once a stop is asked for (``stopped_by`` then says why), grant nothing more and take in what is
        under way."""
        while self.delivered < self.budget:
            if max_seconds is not None and time.monotonic() - self.t0 > max_seconds:
                self._wind_down()
            if self.controls.stop.is_set() and self.stopped_by == "steps":
                self.stopped_by = self.controls.reason or "stop"
                self._wind_down()
                if self.delivered >= self.budget:
                    break
            live = [s for s in self.slots if s.state != "gone"]
            if not live:
                raise ExplorerError(f"every worker failed more than run.worker_restarts = "
                                    f"{self.config.run.worker_restarts} times; the run stops at step {self.run_steps}")
            for slot in live:
                self._schedule(slot)
            waiting = {s.call[1]: s for s in live if s.call is not None}
            pings = {s.ping: s for s in live if s.ping is not None}
            refs = [*waiting, *pings, *self.adds, *self.saves] + ([self.status_call] if self.status_call else [])
            if not refs:
                time.sleep(0.05)
                continue
            ready, _ = ray.wait(refs, num_returns=1, timeout=0.25)
            for ref in ready:
                if ref in waiting:
                    self._report(waiting[ref])
                elif ref in pings:
                    self._pinged(pings[ref])
                elif ref in self.adds:
                    self.adds.remove(ref)
                    self.status = ray.get(ref)
                elif ref in self.saves:
                    self.saves.remove(ref)
                    self._saved(ref)
                else:
                    self.status_call, self.status = None, ray.get(ref)
            self._log_and_save()

    def _wind_down(self) -> None:
        """Grant nothing more: the run ends once the steps already granted are delivered (or lost)."""
        self.budget = min(self.budget, self.delivered + sum(s.granted for s in self.slots))

    def _behind(self) -> bool:
        """The learner is more than ``learner.schedule.lag_steps`` agent steps behind its update-to-data ratio."""
        return self.schedule.behind(self.run_steps, int(self.status["updates"]))

    def _schedule(self, slot: _Slot) -> None:
        """Give an idle worker its next call: a grant, a fetch of its last batch, or a ping after a restart."""
        now = time.monotonic()
        if slot.state == "restarting":
            if slot.ping is None and now >= slot.retry_at:
                if now > slot.deadline:
                    self._give_up(slot, "it did not come back within 5 minutes")
                    return
                slot.ping = slot.handle.ping.remote()
            return
        if slot.call is not None or len(self.adds) >= self.max_adds:
            return
        behind = self._behind()
        if behind and self.status_call is None and now >= self._next_poll:
            # Ask how far the learner got, at most 10 times a second (each answer takes it from training).
            self.status_call, self._next_poll = self.learner.status.remote(), now + 0.1
        committed = self.delivered + sum(s.granted for s in self.slots)
        grant = 0 if behind else min(self.config.run.ship_steps, self.budget - committed)
        if grant <= 0 and slot.granted == 0:
            return
        weights = self.status["weights"]
        slot.call = tuple(slot.handle.collect.options(num_returns=2).remote(
            grant, self.run_steps, int(self.status["version"]), weights))
        slot.granted += grant

    def _report(self, slot: _Slot) -> None:
        assert slot.call is not None
        batch_ref, report_ref = slot.call
        slot.call = None
        try:
            report: Report = ray.get(report_ref)
        except ray.exceptions.RayTaskError as err:
            self._failed(slot, err, game=True)
            return
        except ray.exceptions.RayActorError as err:
            self._failed(slot, err, game=False)
            return
        if report.incarnation != slot.incarnation:
            slot.incarnation = report.incarnation
            slot.incarnations += 1
        slot.state = "running"
        if report.steps:
            self._deliver(slot, batch_ref, report)
        if self.on_report is not None:
            self.on_report(report)

    def _deliver(self, slot: _Slot, batch_ref: Any, report: Report) -> None:
        self.adds.append(self.learner.add.remote(batch_ref, slot.index))
        slot.delivered_any = True
        slot.granted -= report.steps
        slot.steps += report.steps
        slot.seconds += report.seconds
        slot.window_steps += report.steps
        slot.window_seconds += report.seconds
        slot.versions.append(report.version)
        self.delivered += report.steps
        self.transitions += report.transitions
        self.frames += report.frames
        self.bytes += report.nbytes
        self.bar.update(report.steps)
        self._coverage(slot, report)

    def _coverage(self, slot: _Slot, report: Report) -> None:
        """The report's places into the worker's coverage, as a single-process run adds its steps'."""
        cov = slot.coverage
        cov.cell = report.cell  # the game's own cell size (the same in every report of a run)
        if report.budget is not None:
            self.episode_budget = report.budget  # and its episode budget
        ends = dict(zip(report.ends, report.end_steps, strict=True))  # place -> the batch's steps up to it
        counted = 0
        for i, p in enumerate(report.places):
            cov.add_place(p)
            if i in ends:
                cov.episode_steps += ends[i] - counted
                counted = ends[i]
                outcome = report.outcomes[report.ends.index(i)]
                cells = cov.end_episode(outcome)
                self.episode_cells.append(cells)
                self.episode_lengths.append(cov.lengths[-1])
                self.episode_outcomes.append(outcome)
                slot.episodes += 1
                self._episodes_total += 1
                kind = {} if cov.label == MAP_CELLS else {"cells_are": cov.label}  # a game without positions says so
                self.run.log({"step": self.run_steps, "worker": slot.index, "episode": slot.episodes, "cells": cells,
                              **kind, "outcome": outcome})
                figure = cells_per_budget(self.episode_cells, self.episode_lengths, self.episode_budget,
                                          outcomes=self.episode_outcomes)
                self.run.scalars(self.run_steps, {"coverage/cells_per_episode": cells,
                                                  f"coverage/worker_{slot.index}/cells_per_episode": cells,
                                                  "coverage/cells_per_budget": figure})
                self.bar.set_postfix(episodes=self._episodes_total, cells=cells, cells_per_budget=f"{figure:.1f}")
        cov.episode_steps += report.steps - counted  # the steps of the episode still under way

    def _failed(self, slot: _Slot, err: BaseException, game: bool) -> None:
        """A call failed: the game or loop raised (``game``), or the worker's process died."""
        reason = _one_line(err)
        if slot.state == "new" and not slot.delivered_any and game:
            raise ExplorerError(reason)  # it could not even start (a missing map, say): every restart would fail too
        if slot.granted:
            slot.lost_batches += 1
            slot.lost_steps += slot.granted
            slot.granted = 0
        slot.failed_incarnation = slot.incarnation
        slot.restarts += 1
        if slot.restarts > self.config.run.worker_restarts:
            self._give_up(slot, reason)
            return
        if game:
            ray.kill(slot.handle, no_restart=False)  # Ray restarts a killed actor like a dead one
        print(f"explorer: worker {slot.index} failed ({reason}); restarting it "
              f"({slot.restarts} of run.worker_restarts = {self.config.run.worker_restarts})", file=sys.stderr)
        now = time.monotonic()
        slot.state, slot.retry_at, slot.deadline = "restarting", now + 0.5, now + 300.0

    def _pinged(self, slot: _Slot) -> None:
        ref, slot.ping = slot.ping, None
        try:
            incarnation = ray.get(ref)
        except ray.exceptions.RayTaskError as err:  # it restarted, and its game failed again at once
            slot.state = "running"
            self._failed(slot, err, game=True)
            return
        except ray.exceptions.RayActorError:  # still restarting
            slot.retry_at = time.monotonic() + 0.5
            return
        if incarnation == slot.failed_incarnation:  # the kill has not reached it yet
            slot.retry_at = time.monotonic() + 0.5
            return
        slot.state, slot.incarnation = "running", incarnation
        slot.incarnations += 1

    def _give_up(self, slot: _Slot, reason: str) -> None:
        slot.state, slot.ping, slot.call = "gone", None, None
        slot.lost_steps += slot.granted
        slot.granted = 0
        print(f"explorer: worker {slot.index} is left out of the rest of the run ({reason}; it failed "
              f"{slot.restarts} times)", file=sys.stderr)

    # ------------------------------------------------------------ metrics and checkpoints
    def _saved(self, ref: Any) -> None:
        """A checkpoint that failed stops the run, as in one process (and is not tried again on the way out)."""
        try:
            ray.get(ref)
        except ray.exceptions.RayError as err:
            self.save_failed = True
            raise ExplorerError(_one_line(err)) from None

    def _log_and_save(self) -> None:
        if self._next_save is not None and self.run_steps >= self._next_save:
            self.saves.append(self.learner.save.remote())
            every = self.config.learner.schedule.checkpoint_every
            self._next_save = (self.run_steps // every + 1) * every
        if self.run_steps >= self._next_log:
            self._log()
            every = self.config.run.log_every
            self._next_log = (self.run_steps // every + 1) * every

    def update_to_data(self, status: dict[str, Any]) -> float:
        """Updates per agent step measured this session, from the end of the warm-up on."""
        learning = self.run_steps - max(self.start, self.config.learner.schedule.warmup_steps)
        updates = int(status["updates"]) - int(self.status_first["updates"])
        return updates / learning if learning > 0 else 0.0

    def _log(self) -> None:
        status = ray.get(self.learner.status.remote(metrics=True))
        now = time.monotonic()
        t, steps, updates, transitions = self._window
        dt = max(now - t, 1e-9)
        line: dict[str, Any] = {
            "step": self.run_steps, "steps_per_s": (self.run_steps - steps) / dt,
            "updates": status["updates"], "updates_per_s": (status["updates"] - updates) / dt,
            "transitions_per_s": (status["transitions"] - transitions) / dt,
            "update_to_data": self.update_to_data(status), "update_to_data_setting": 1 / self.config.learner.schedule.update_every,
            "transitions": status["transitions"],
            "weights_version": status["version"], "learner_rss_mb": status["rss_mb"],
            "lost_batches": sum(s.lost_batches for s in self.slots),
            "worker_restarts": sum(s.restarts for s in self.slots),
            "coverage/distinct_cells": len(set().union(*(s.coverage.all_cells for s in self.slots))),
            **status.get("metrics", {})}
        per_worker = {}
        for s in self.slots:
            rate = s.window_steps / s.window_seconds if s.window_seconds > 0 else 0.0
            per_worker[str(s.index)] = {"steps": s.steps, "steps_per_s": rate, "version": s.versions[-1] if s.versions else -1,
                                        "episodes": s.episodes, "distinct_cells": len(s.coverage.all_cells),
                                        "restarts": s.restarts}
            s.window_steps, s.window_seconds = 0, 0.0
        self.run.log({**line, "workers": per_worker})
        scalars = {f"throughput/{k}": line[k] for k in ("steps_per_s", "updates_per_s", "transitions_per_s",
                                                        "update_to_data")}
        scalars |= {f"learner/{k}": v for k, v in status.get("metrics", {}).items()}
        scalars["coverage/distinct_cells"] = line["coverage/distinct_cells"]
        for i, w in per_worker.items():
            scalars |= {f"workers/worker_{i}/steps_per_s": w["steps_per_s"],
                        f"coverage/worker_{i}/distinct_cells": w["distinct_cells"]}
        self.run.scalars(self.run_steps, scalars)
        self._window = (now, self.run_steps, int(status["updates"]), int(status["transitions"]))
        self.status = status

    def shutdown(self) -> dict[str, Any]:
        """Stop the workers (their games end neutral) and the learner, once the checkpoints under way are
        written; returns the learner's last status (its steps: what the last checkpoint holds)."""
        self.bar.close()
        live = [s.handle.stop.remote() for s in self.slots if s.state != "gone"]
        _wait_quietly(live, 60.0)
        ray.get(self.learner.stop.remote())
        for ref in self.saves:
            self._saved(ref)
        return ray.get(self.learner.status.remote(metrics=True))


class LearnerCheckpoints:
    """The learner actor's checkpoints, kept by the run's assembly as a checkpointer of this process
    (:meth:`~explorer.run.assembly.Setup.use_checkpointer`): in the run's ``directory``, written where the
    learner runs; ``coordinator`` is the run's, once it exists."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.coordinator: Coordinator | None = None

    @property
    def failed(self) -> bool:
        """A checkpoint of the run failed: the run stops, and its way out does not try again."""
        return self.coordinator is not None and self.coordinator.save_failed

    def save(self, steps: int) -> str:
        """The stopped learner's checkpoint, at the ``steps`` it took in; returns its path prefix."""
        assert self.coordinator is not None
        try:
            return ray.get(self.coordinator.learner.save.remote())
        except ray.exceptions.RayError as err:
            raise ExplorerError(f"the learner failed while the run stopped: {_one_line(err)}") from None


def _wait_quietly(refs: list[Any], timeout: float) -> None:
    """Wait for calls whose failure no longer matters (workers stopping at the end of a run)."""
    if refs:
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        for ref in ready:
            with suppress(ray.exceptions.RayError):
                ray.get(ref)


def explore_workers(a: Assembly, progress: bool, run_path: str | Path | None,
                    on_report: Callable[[Report], None] | None = None) -> dict[str, Any]:
    """``explore`` with ``run.workers`` game instances on a Ray cluster; returns the run summary.

    Args:
      a: the run's assembly (:class:`~explorer.run.assembly.Assembly`), its run directory open (a resume:
        reopened, its config not yet committed); a stop its signals ask for ends the run with a checkpoint,
        and the summary's ``stopped_by`` names it.
      progress: show a progress bar.
      run_path: the run directory to resume, or None.
      on_report: called with each worker's report as it arrives.
    """
    from explorer.run.explore import game_title
    from explorer.run.plots import plot_workers

    config, run, signals, kept = a.config, a.run, a.signals, a.kept
    assert run is not None
    if config.game.name == "gym":  # a game that cannot be made says so in seconds, not once a cluster is up
        from explorer.envs.gym.env import make
        make(config.game).close()
    checkpoints = LearnerCheckpoints(run.path / "checkpoints")  # the learner's, wherever it runs
    a.use_checkpointer(checkpoints)
    with a.loop() as stack:
        cluster = Cluster(config)
        stack.callback(cluster.close)
        learner = cluster.learner(config, run.path, resume=run_path is not None)
        workers = [cluster.worker(config, i) for i in range(config.run.workers)]  # built while the learner is
        try:
            status = ray.get(learner.status.remote())
        except ray.exceptions.RayError as err:
            raise ExplorerError(_one_line(err)) from None
        if run_path is not None:
            continue_run(run, run_path, int(status["start"]), config, commit=True)
        coordinator = Coordinator(config, run, workers, learner, status, on_report, progress, signals)
        checkpoints.coordinator = coordinator
        final: dict[str, Any] = {}
        # on every way out, Ctrl-C included, once the workers and the learner have stopped
        keep = a.checkpoint_on_exit(lambda: int(final.get("steps", 0)), since=coordinator.start)
        kept.started = True
        try:
            coordinator.loop()
        finally:  # on every way out: workers stopped, learner stopped
            try:
                final.update(coordinator.shutdown())
            except ray.exceptions.RayError as err:
                raise ExplorerError(f"the learner failed while the run stopped: {_one_line(err)}") from None
        final["checkpoint"] = keep()
        seconds = time.monotonic() - coordinator.t0
        slots = coordinator.slots
        written = coordinator.delivered > 0  # a new run stopped before its first step is removed
        picture = plot_workers([s.coverage for s in slots], run.path / "trajectory.png",
                               title=f"{game_title(config)}, agent={config.run.agent}, {len(slots)} workers, "
                                     f"{coordinator.delivered} steps") if written else None
        summary = _summary(config, run, coordinator, final, seconds, picture, cluster)
        summary["kept"] = str(kept) if written or run_path is not None else "nothing was kept"
        if written:
            run.write_summary(summary)
    return summary


def _summary(config: Config, run: RunDir, c: Coordinator, final: dict[str, Any], seconds: float,
             picture: Path | None, cluster: Cluster) -> dict[str, Any]:
    workers = []
    partials = 0
    for s in c.slots:
        cov = s.coverage
        partial = finish_episode(cov)  # the unfinished last episode counts in the picture, not in the means
        partials += partial
        figures = coverage_summary(cov, ("cells_in_unfinished_episode", partial), c.episode_budget)
        workers.append({"worker": s.index, "steps": s.steps, "episodes": s.episodes,
                        "steps_per_s": s.steps / s.seconds if s.seconds > 0 else 0.0,
                        **{k: figures[k] for k in ("cells_per_episode", "episode_lengths", "cells_per_budget",
                                                   "distinct_cells", "distinct_rooms")},
                        "restarts": s.restarts, "lost_batches": s.lost_batches,
                        "lost_steps": s.lost_steps, "incarnations": s.incarnations,
                        "weights_versions": [min(s.versions), max(s.versions)] if s.versions else [],
                        "transitions_in_replay": final["by_worker"].get(s.index, 0), "state": s.state})
    union = Coverage.union([s.coverage for s in c.slots])  # what every worker visited, as one run's coverage
    steps = c.delivered
    updates = int(final["updates"]) - int(c.status_first["updates"])
    return {
        "run_dir": str(run.path), "steps": steps, "resumed_at": c.start, "episodes": sum(s.episodes for s in c.slots),
        "seconds": round(seconds, 2), "steps_per_s": steps / seconds if seconds > 0 else 0.0,
        **coverage_summary(union, ("cells_in_unfinished_episodes", partials), c.episode_budget,
                           episodes=(c.episode_cells, c.episode_lengths, c.episode_outcomes)),
        "trajectory_png": str(picture) if picture is not None else None,
        "loop": {"steps": steps, "stopped_by": c.stopped_by}, "stopped_by": c.stopped_by,
        "session": None, "checkpoint": final.get("checkpoint"),
        "updates": int(final["updates"]), "updates_this_run": updates,
        "updates_per_s": final["updates_per_s"], "update_to_data": c.update_to_data(final),
        "update_to_data_setting": 1 / config.learner.schedule.update_every,
        "transitions": final["transitions"], "transitions_per_s": final["transitions"] / seconds if seconds > 0 else 0.0,
        "weights_version": final["version"], "lost_batches": sum(s.lost_batches for s in c.slots),
        "lost_steps": sum(s.lost_steps for s in c.slots), "worker_restarts": sum(s.restarts for s in c.slots),
        "workers": workers,
        "learner": {"host": final["host"], "gpus": final["gpu"], "rss_mb": round(final["rss_mb"], 1),
                    "train_seconds": round(final["train_seconds"], 2),
                    "merge_seconds": round(final["merge_seconds"], 2), "replay": final["replay"],
                    "batches": final["batches"], "frames": final["frames"]},
        "cluster": {"address": cluster.address, "cpus": cluster.cpus, "gpus": cluster.gpus},
    }
