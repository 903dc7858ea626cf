"""The run assembly: what every mode sets up around its loop, in one place.

An :class:`Assembly` is entered once per run. Entering it sizes TensorFlow's
thread pools, seeds everything and installs the stop signals (Ctrl-C, SIGTERM
and SIGHUP end the run at a step, keeping what it did); errors leaving it say
what the run kept. Within it a mode opens (or reopens) its run directory,
builds (or restores) the learning agent, and attaches the periodic and final
checkpoints, the session recorder and the progress bar to its driver; it
names only its env, actor, trainer and observers, and its summary.

Exits run in the reverse order of what was attached (:class:`contextlib.ExitStack`):
what a mode attaches after its env is closed before it, what it attaches
before, after.

A process that runs one part of a run, a worker or the learner of
``explore --workers N`` (a Ray actor's process: no stop signals of its own, the
run directory the coordinator's), sets up with the :class:`Setup` an Assembly
is made of: thread pools and devices, seeds, the agent built or restored, and
its checkpoints.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from explorer.config import Config
from explorer.core import ExplorerError
from explorer.run.driver import Controls, Driver, NonFiniteAction, RunStats, Transition
from explorer.run.observers import SessionRecorder, open_recorder
from explorer.run.rundir import RunDir
from explorer.run.safety import Kept, SignalStop, stop_on_signals


class Setup:
    """What one process of a run sets up for its part: TensorFlow's devices and thread pools, the seeds,
    the agent (built, or restored from a checkpoint), its checkpoints.

    Args:
      config: the merged config (the part's own: a worker's seeds are its own).
      run_path: the run's folder (its checkpoints go to ``<run_path>/checkpoints``).

    Attributes:
      agent, checkpointer: the agent and its checkpoints (:meth:`learning_agent`, :meth:`acting_agent`).
      start: agent steps the run had done before (a resume).
    """

    def __init__(self, config: Config, run_path: str | Path = Path()):
        self.config = config
        self.run_path = Path(run_path)
        self.agent: Any = None
        self.checkpointer: Any = None
        self.start = 0

    def prepare(self, seed: int, eager: bool = False, threads: tuple[int, int] | None = None,
                gpu: bool = True) -> None:
        """Before TensorFlow runs in this process: hide its GPUs unless ``gpu``, size its thread pools
        (``(inter, intra)`` as ``run.threads`` says them; None: as they are), seed everything with ``seed``;
        ``eager`` runs tf.functions eagerly."""
        from explorer.run.builder import configure_threads, seed_everything

        if not gpu:
            import tensorflow as tf

            tf.config.set_visible_devices([], "GPU")
        if threads is not None:
            configure_threads(threads)
        seed_everything(seed, eager=eager)

    def learning_agent(self, frame_shape: tuple[int, int, int], acting_copy: bool = False,
                       restore: str | Path | None = None, agent: Any = None) -> Any:
        """The learning agent (``agent``, else a new one: :func:`~explorer.run.builder.build_agent`), its
        checkpoints in the run's folder; with ``restore``, from that run directory's latest checkpoint: it
        starts a new episode (whatever the game is doing now, it is not where that run stopped), acts with
        the restored weights, and :attr:`start` is the steps it had done."""
        from explorer.run.builder import build_agent

        agent = agent or build_agent(self.config, frame_shape, acting_copy=acting_copy)
        self.agent = agent
        self.use_checkpointer(agent.checkpointer(self.run_path / "checkpoints"))
        if restore is not None:
            own = Path(restore) == self.run_path  # its own: its next save prunes any checkpoint after the one restored
            (self.checkpointer if own else agent.checkpointer(Path(restore) / "checkpoints")).restore()
            agent.actor.new_episode = True
            agent.actor.set_weights(agent.learner.get_weights())
            self.start = agent.actor.steps
        return agent

    def acting_agent(self, frame_shape: tuple[int, int, int], sink: Any) -> Any:
        """The acting half alone (:func:`~explorer.run.builder.build_acting`, a worker's): its adder writes
        into ``sink``, its weights arrive from a learner elsewhere; it keeps no checkpoint."""
        from explorer.run.builder import build_acting

        self.agent = build_acting(self.config, frame_shape, sink)
        return self.agent

    def use_checkpointer(self, checkpointer: Any) -> None:
        """Keep the run's checkpoints with ``checkpointer`` (its ``directory``, ``failed`` and ``save(steps)``)."""
        self.checkpointer = checkpointer


class Assembly(Setup):
    """One run's frame: threads, seeds, signals, errors, run directory, agent, checkpoints, recorder, progress.

    Args:
      config: the merged config.
      kind: the kind of run (``"explore"``, ``"play"``), which names a new run directory.
      resume: how an error's message says to continue the run from its checkpoint (``{run_dir}`` is the
        run directory), e.g. ``"continue with: explorer explore --resume {run_dir}"``.
      controls: the run's stop and pause switches (default: new ones).
      eager: ``run.eager`` applies (tf.functions run eagerly when it is set).
      setup: size the thread pools and seed everything on entering (False: the caller has, as the replay
        command does once for training and evaluation).

    Attributes (once entered):
      controls, kept (:class:`~explorer.run.safety.Kept`), signals (:class:`~explorer.run.safety.SignalStop`),
      stack: the :class:`ExitStack` closed when the run (or its :meth:`loop`) ends.
      run: the run directory (:meth:`open_run`). agent, checkpointer: the learning agent and its checkpoints
      (:meth:`learning_agent`). start: agent steps the run had done before (a resume).
    """

    def __init__(self, config: Config, kind: str, resume: str | None = None, controls: Controls | None = None,
                 eager: bool = True, setup: bool = True):
        super().__init__(config)
        self.setup = setup
        self.kind = kind
        self.resume = resume
        self.eager = eager
        self.controls = controls or Controls()
        self.kept = Kept()
        self.run: RunDir | None = None
        self.reopened = False
        self._outer = ExitStack()
        self.stack = self._outer

    def __enter__(self) -> Assembly:
        config = self.config
        if self.setup:
            self.prepare(config.run.seed, eager=config.run.eager and self.eager, threads=config.run.threads)
        with ExitStack() as outer:
            # Ctrl-C and SIGTERM end the run at a step, keeping what it did; errors say what was kept
            self.signals: SignalStop = outer.enter_context(stop_on_signals(self.controls, self.kept))
            outer.enter_context(self.kept.on_error(self.resume))
            self._outer = outer.pop_all()
        self.stack = self._outer
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self._outer.__exit__(kind, err, tb)  # nothing in it swallows an error

    @contextmanager
    def loop(self) -> Iterator[ExitStack]:
        """A block whose end closes what is attached in it (the env, the recorder, the bar, the final
        checkpoint), while the run directory stays open for the summary."""
        outer = self.stack
        with ExitStack() as stack:
            self.stack = stack
            try:
                yield stack
            finally:
                self.stack = outer

    # ------------------------------------------------------------ the run directory
    def open_run(self, reopen: str | Path | None = None) -> RunDir:
        """A new run directory under ``run.dir``, or ``reopen`` (a resume: nothing in it changes until the
        run's first step, which commits its config; see :meth:`count_steps`)."""
        run = RunDir.reopen(reopen) if reopen is not None else RunDir(self.config.run.dir, self.kind, self.config)
        self.run, self.reopened, self.run_path = run, reopen is not None, run.path
        self.kept.run_dir = run.path
        self.stack.enter_context(run)
        return run

    def use_run_path(self, path: Path) -> None:
        """Keep the run's files in ``path``, a folder opened by the caller (not a run directory of its own)."""
        self.run_path = path
        self.kept.run_dir = path

    def count_steps(self, driver: Driver) -> Callable[[], int]:
        """``done()``: the agent steps so far, over all resumptions; a reopened run's config is committed at
        its first step (the resume goes on: its settings become the run's)."""
        assert self.run is not None
        run, config, start = self.run, self.config, self.start
        done = [start]

        def count(t: Transition) -> None:
            if self.reopened and done[0] == start:
                run.commit_config(config)
            done[0] = start + t.index

        driver.on_step(count)
        return lambda: done[0]

    # ------------------------------------------------------------ the agent (Setup.learning_agent)
    def use_checkpointer(self, checkpointer: Any) -> None:
        """Keep the run's checkpoints with ``checkpointer``; errors leaving the run name its newest."""
        super().use_checkpointer(checkpointer)
        self.kept.checkpoints = checkpointer.directory

    # ------------------------------------------------------------ checkpoints
    def checkpoint_every(self, driver: Driver, every: int, done: Callable[[], int],
                         settle: Callable[[], None] | None = None) -> None:
        """Checkpoint every ``every`` agent steps (0: never), after ``settle()`` (settled weights); a second
        signal lets the checkpoint under way finish."""
        checkpointer, signals = self.checkpointer, self.signals

        def save(t: Transition) -> None:
            if every and done() % every == 0:
                if settle is not None:
                    settle()
                with signals.held():
                    checkpointer.save(done())

        driver.on_step(save)

    def checkpoint_on_exit(self, steps: Callable[[], int], since: int = 0,
                           settle: Callable[[], None] | None = None) -> Callable[[], str | None]:
        """Keep what was learned on every way out, Ctrl-C included: ``settle()``, then a checkpoint at ``steps()``
        when that is more than ``since``; not again after a failed one, and not of weights that produced
        non-finite sticks (the checkpoint before them stays the newest).

        Attached now: exits attached later run first. Returns ``keep()``, which does it once (before a
        summary that names the checkpoint) and returns the checkpoint (None: none written).
        """
        checkpointer, signals = self.checkpointer, self.signals
        kept: list[str | None] = []

        def keep() -> str | None:
            if not kept:
                kept.append(None)
                if settle is not None:
                    settle()
                n = steps()
                if n > since and not checkpointer.failed:
                    with signals.held():
                        kept[0] = checkpointer.save(n)
            return kept[0]

        def on_exit(kind: Any, err: BaseException | None, tb: Any) -> None:
            if not isinstance(err, NonFiniteAction):
                keep()

        self.stack.push(on_exit)
        return keep

    # ------------------------------------------------------------ recorder, progress, the loop
    def record(self, driver: Driver, source: str, name: str | None = None, **meta: Any) -> SessionRecorder | None:
        """Record the run as a session under ``record.dir`` (None when not recording); a learning agent's
        decision boundaries are recorded with it."""
        agent = self.agent
        recorder = open_recorder(self.config, self.run_path, source=source, name=name,
                                 decisions=(lambda: agent.actor.started) if agent is not None else None, **meta)
        if recorder is not None:
            self.kept.session = recorder.path
            self.stack.callback(recorder.close)
            recorder.attach(driver)
        return recorder

    def progress(self, driver: Driver | None, total: int | None, enabled: bool, initial: int = 0) -> Any:
        """A progress bar of agent steps, advanced by ``driver``'s steps; closed at the end."""
        bar = progress_bar(total, enabled, initial)
        self.stack.callback(bar.close)
        if driver is not None:
            driver.on_step(lambda t: bar.update(1))
        return bar

    def go(self, driver: Driver, **limits: Any) -> RunStats:
        """Run the loop (``max_steps``, ``max_seconds``): from here on, what the run kept is said on every
        way out."""
        self.kept.started = True
        return driver.run(**limits)


def progress_bar(total: int | None, enabled: bool, initial: int = 0) -> Any:
    """The progress bar of a run's agent steps (``tqdm``; a disabled one shows nothing)."""
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, disable=not enabled, unit="step", dynamic_ncols=True)


def continue_run(run: RunDir, run_path: str | Path, start: int, config: Config, commit: bool = False) -> None:
    """A resumed run goes on at step ``start``: refused (one line, nothing changed) unless ``run.steps`` asks
    for more; ``commit`` makes the resume's settings the run's now; says on stderr where it goes on."""
    if start >= config.run.steps:
        raise ExplorerError(f"--resume {run_path}: the run has done {start} steps already and run.steps = "
                            f"{config.run.steps}; ask for more with --steps (more than {start}). Nothing was changed")
    if commit:
        run.commit_config(config)
    print(f"resumed {run.path} at step {start}", file=sys.stderr)
