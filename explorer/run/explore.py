"""``explorer explore``: the built-in game, headless, the learning actor with an inline learner.

The driver runs the game env; observers train (one update every
``learner.update_every`` steps after the warm-up), measure coverage, log,
record and checkpoint. The summary goes to ``<run>/summary.json``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from explorer.agent.memory import check_memory
from explorer.agent.schedule import UpdateSchedule
from explorer.agent.threaded import LockstepLearner
from explorer.agent.trainer import InlineTrainer, Trainer
from explorer.config import Config
from explorer.core import Actor, ExplorerError
from explorer.run.driver import Controls, Driver, NonFiniteAction, Transition
from explorer.run.observers import Coverage, MetricsLog, Training, open_recorder
from explorer.run.rundir import RunDir
from explorer.run.safety import Kept, SignalStop, stop_on_signals


def explore(config: Config, progress: bool = True, run_path: str | Path | None = None,
            actor: Actor | None = None, on_report: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """The main job: explore the built-in game headless; returns the run summary.

    With ``run.workers > 1`` the games run on a Ray cluster (:mod:`explorer.run.distributed`).

    Args:
      config: the merged config.
      progress: show a progress bar.
      run_path: an existing run directory to resume (its latest checkpoint).
      actor: an actor to use instead of the one ``run.agent`` names (benchmarks of outside agents).
      on_report: ``run.workers > 1``: called with each worker's :class:`~explorer.run.workers.Report`
        as it arrives (tools, tests).
    """
    check_memory(config)  # the learner's buffers fit in the memory free, before anything is started
    from explorer.run.builder import configure_threads, seed_everything

    if config.run.workers > 1:
        require_ray(config.run.workers)
    configure_threads(config.run.threads)
    seed_everything(config.run.seed, eager=config.run.eager)
    controls, kept = Controls(), Kept()
    with stop_on_signals(controls, kept) as signals:  # Ctrl-C and SIGTERM end the run at a step, keeping what it did
        # A resume changes nothing in the run until its first step (then its config is committed).
        run = RunDir.reopen(run_path) if run_path is not None else RunDir(config.run.dir, "explore", config)
        kept.run_dir = run.path
        with kept.on_error("continue with: explorer explore --resume {run_dir}"), run:  # errors say what was kept
            if config.run.workers > 1:
                from explorer.run.distributed import explore_workers
                return explore_workers(config, run, progress, run_path, on_report, signals, kept)
            return _explore(config, run, progress, run_path, actor, signals, kept)


def require_ray(workers: int) -> None:
    """Raise a one-line :class:`ExplorerError` saying how to install Ray when it is missing."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ExplorerError(f"run.workers = {workers} runs the games on Ray, which is not installed: "
                            f"pip install -e '.[ray]' (or pip install 'ray>=2.10'), or use run.workers = 1") from None


def _explore(config: Config, run: RunDir, progress: bool, run_path: str | Path | None, actor: Actor | None,
             signals: SignalStop, kept: Kept) -> dict[str, Any]:
    from tqdm import tqdm

    from explorer.envs import make_env
    from explorer.run.builder import build_agent, build_baseline
    from explorer.run.plots import plot_trajectory

    if run_path is not None and (actor is not None or config.run.agent != "explorer"):
        raise ExplorerError(f"--resume {run_path}: run.agent = {config.run.agent!r} keeps no checkpoint; "
                            "resume runs of the learning agent (run.agent = explorer). Nothing was changed")
    with ExitStack() as stack:
        env = make_env(config)
        stack.callback(env.close)
        agent = None
        if actor is None:
            if config.run.agent == "explorer":
                agent = build_agent(config, env.frame_shape, acting_copy=config.learner.overlap)
                actor = agent.actor
            else:
                actor = build_baseline(config)
        checkpointer = agent.checkpointer(run.path / "checkpoints") if agent is not None else None
        if checkpointer is not None:
            kept.checkpoints = checkpointer.directory
        start = 0
        if run_path is not None:
            assert agent is not None and checkpointer is not None  # checked above
            checkpointer.restore()
            agent.actor.new_episode = True  # whatever the game is doing now, it is not where the run stopped
            agent.actor.set_weights(agent.learner.get_weights())
            start = agent.actor.steps
            if start >= config.run.steps:
                raise ExplorerError(f"--resume {run_path}: the run has done {start} steps already and run.steps = "
                                    f"{config.run.steps}; ask for more with --steps (more than {start}). Nothing was changed")
            print(f"resumed {run.path} at step {start}", file=sys.stderr)

        driver = Driver(env, actor, signals.controls)
        done = [start]  # agent steps so far, over all resumptions

        def count(t: Transition) -> None:
            if run_path is not None and done[0] == start:
                run.commit_config(config)  # the resume goes on: its settings become the run's
            done[0] = start + t.index

        driver.on_step(count)
        lockstep = None
        if agent is not None:
            schedule = UpdateSchedule.from_config(config.learner)
            trainer: Trainer = InlineTrainer(agent.learner, schedule)
            if config.learner.overlap:
                trainer = lockstep = LockstepLearner(agent.learner, agent.actor, adds_per_step(config), schedule)
                stack.callback(lockstep.stop)
            acting = agent.actor
            Training(trainer.start(), lambda: acting.steps).attach(driver)
        if checkpointer is not None:
            every = config.learner.checkpoint_every

            def save(t: Transition) -> None:
                if every and done[0] % every == 0:
                    if lockstep is not None:
                        lockstep.drain()  # the checkpoint holds settled weights
                    with signals.held():
                        checkpointer.save(done[0])

            driver.on_step(save)
        coverage = Coverage(lambda s: s.info["position"], cell=env.cell)
        coverage.attach(driver)
        bar = tqdm(total=config.run.steps, initial=start, disable=not progress, unit="step", dynamic_ncols=True)
        stack.callback(bar.close)
        MetricsLog(run, config.run.log_every, lambda: done[0], coverage,
                   episode_info=lambda: {"outcome": env.outcome}, buttons=config.pad.buttons).attach(driver)
        driver.on_step(lambda t: bar.update(1))
        driver.on_episode(lambda n: bar.set_postfix(episode=n, cells=coverage.coverage.per_episode[-1],
                                                    last20=f"{coverage.coverage.recent_mean():.1f}"))
        recorder = open_recorder(config, run.path, source="game", name=f"{run.path.name}-from-{start}" if start else None,
                                 decisions=(lambda: agent.actor.started) if agent is not None else None)
        if recorder is not None:
            kept.session = recorder.path
            stack.callback(recorder.close)
            recorder.attach(driver)

        def final_checkpoint(kind: Any, err: BaseException | None, tb: Any) -> None:
            # on every way out, Ctrl-C included; not again after a failed one, and not of weights that
            # produced non-finite sticks (the checkpoint before them stays the newest)
            if lockstep is not None and lockstep.error is None and not isinstance(err, NonFiniteAction):
                lockstep.drain()
            if (checkpointer is not None and done[0] > start and not checkpointer.failed
                    and not isinstance(err, NonFiniteAction)):
                with signals.held():
                    checkpointer.save(done[0])

        stack.push(final_checkpoint)  # runs before the env closes and the run directory is released
        kept.started = True
        stats = driver.run(max_steps=max(config.run.steps - start, 0))

    cov = coverage.coverage
    if cov.episode_cells:
        cov.end_episode()  # the unfinished last episode counts in the picture, not in last-20 means below
        partial = cov.per_episode.pop()
    else:
        partial = 0
    # a run stopped before its first step writes nothing: a new one is removed, a resumed one stays as it was
    written = stats.steps > 0
    picture = plot_trajectory(cov, run.path / "trajectory.png",
                              title=f"{game_title(config)}, agent={config.run.agent}, "
                                    f"{stats.steps} steps") if written else None
    summary = {
        "run_dir": str(run.path), "steps": stats.steps, "resumed_at": start, "episodes": stats.episodes,
        "seconds": round(stats.seconds, 2), "steps_per_s": stats.hz,
        "cells_per_episode": cov.per_episode, "cells_in_unfinished_episode": partial,
        "cells_per_episode_last20": cov.recent_mean(20), "distinct_cells": len(cov.all_cells), "cells": cov.label,
        "distinct_rooms": len(cov.rooms()) or None,
        "trajectory_png": str(picture) if picture is not None else None, "loop": stats.summary(),
        "session": str(recorder.path) if recorder is not None else None,
        "checkpoint": checkpointer.latest if checkpointer is not None else None,
        "updates": int(agent.learner.updates.numpy()) if agent is not None else 0,
        "stopped_by": stats.stopped_by,
        "kept": str(kept) if written else f"{run.path} is as it was" if run_path is not None else "nothing was kept",
    }
    if written:
        run.write_summary(summary)
    return summary


def adds_per_step(config: Config) -> tuple[int, int]:
    """``(transitions, frames)`` the adder writes at most in one agent step: an episode's end flushes
    ``n_step`` transitions; its start writes the first observation's frames and the next one."""
    return config.learner.n_step + 1, config.observation.stack + 2


def game_title(config: Config) -> str:
    """The game a run played, for its picture: the Gymnasium id, else the map or the scenario."""
    return config.game.id if config.game.name == "gym" else config.game.map or config.game.scenario
