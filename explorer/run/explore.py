"""``explorer explore``: the built-in game, headless, the learning actor with an inline learner.

The driver runs the game env; observers train (one update every
``learner.schedule.update_every`` steps after the warm-up), measure coverage, log,
record and checkpoint. The summary goes to ``<run>/summary.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from explorer.agent.memory import check_memory
from explorer.agent.schedule import UpdateSchedule
from explorer.agent.threaded import LockstepLearner
from explorer.agent.trainer import InlineTrainer, Trainer
from explorer.config import Config
from explorer.core import Actor, ExplorerError
from explorer.run.assembly import Assembly, continue_run
from explorer.run.coverage import coverage_summary, finish_episode
from explorer.run.driver import Driver
from explorer.run.observers import Coverage, MetricsLog, Training
from explorer.run.rundir import RunDir


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
    if config.run.workers > 1:
        require_ray(config.run.workers)
    with Assembly(config, "explore", resume="continue with: explorer explore --resume {run_dir}") as a:
        run = a.open_run(reopen=run_path)  # a resume changes nothing in the run until its first step
        if config.run.workers > 1:
            from explorer.run.distributed import explore_workers
            return explore_workers(a, progress, run_path, on_report)
        return _explore(a, run, progress, run_path, actor)


def require_ray(workers: int) -> None:
    """Raise a one-line :class:`ExplorerError` saying how to install Ray when it is missing."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ExplorerError(f"run.workers = {workers} runs the games on Ray, which is not installed: "
                            f"pip install -e '.[ray]' (or pip install 'ray>=2.10'), or use run.workers = 1") from None


def _explore(a: Assembly, run: RunDir, progress: bool, run_path: str | Path | None, actor: Actor | None) -> dict[str, Any]:
    from explorer.envs import make_env
    from explorer.run.builder import build_baseline
    from explorer.run.plots import plot_trajectory

    config = a.config
    if run_path is not None and (actor is not None or config.run.agent != "explorer"):
        raise ExplorerError(f"--resume {run_path}: run.agent = {config.run.agent!r} keeps no checkpoint; "
                            "resume runs of the learning agent (run.agent = explorer). Nothing was changed")
    with a.loop() as stack:
        env = make_env(config)
        stack.callback(env.close)
        agent = None
        if actor is None and config.run.agent == "explorer":
            agent = a.learning_agent(env.frame_shape, acting_copy=config.learner.schedule.overlap, restore=run_path)
            actor = agent.actor
        elif actor is None:
            actor = build_baseline(config)
        start = a.start
        if run_path is not None:
            continue_run(run, run_path, start, config)
        driver = Driver(env, actor, a.controls)
        done = a.count_steps(driver)
        lockstep = _train(a, driver, agent, done) if agent is not None else None
        coverage = Coverage(lambda s: s.info["position"], cell=env.cell, outcome=lambda: env.outcome)
        coverage.attach(driver)
        budget = env.episode_budget
        MetricsLog(run, config.run.log_every, done, coverage, episode_info=lambda: {"outcome": env.outcome},
                   buttons=config.pad.buttons, budget=budget).attach(driver)
        bar = a.progress(driver, config.run.steps, progress, initial=start)
        driver.on_episode(lambda n: bar.set_postfix(episode=n, cells=coverage.visited.per_episode[-1],
                                                    cells_per_budget=f"{coverage.visited.figure(budget):.1f}"))
        recorder = a.record(driver, "game", name=f"{run.path.name}-from-{start}" if start else None)
        if agent is not None:  # on every way out, before the env closes
            a.checkpoint_on_exit(done, since=start, settle=lambda: _settle(lockstep))
        stats = a.go(driver, max_steps=max(config.run.steps - start, 0))

    cov = coverage.visited
    partial = finish_episode(cov)  # the unfinished last episode counts in the picture, not in the figures below
    # a run stopped before its first step writes nothing: a new one is removed, a resumed one stays as it was
    written = stats.steps > 0
    picture = plot_trajectory(cov, run.path / "trajectory.png",
                              title=f"{game_title(config)}, agent={config.run.agent}, "
                                    f"{stats.steps} steps") if written else None
    summary = {
        "run_dir": str(run.path), "steps": stats.steps, "resumed_at": start, "episodes": stats.episodes,
        "seconds": round(stats.seconds, 2), "steps_per_s": stats.hz,
        **coverage_summary(cov, unfinished=("cells_in_unfinished_episode", partial), budget=budget),
        "trajectory_png": str(picture) if picture is not None else None, "loop": stats.summary(),
        "session": str(recorder.path) if recorder is not None else None,
        "checkpoint": a.checkpointer.latest if a.checkpointer is not None else None,
        "updates": int(agent.learner.updates.numpy()) if agent is not None else 0,
        "stopped_by": stats.stopped_by,
        "kept": str(a.kept) if written else f"{run.path} is as it was" if run_path is not None else "nothing was kept",
    }
    if written:
        run.write_summary(summary)
    return summary


def _train(a: Assembly, driver: Driver, agent: Any, done: Callable[[], int]) -> LockstepLearner | None:
    """The inline learner (or, with ``learner.schedule.overlap``, the lockstep one, returned) on its schedule, and
    the periodic checkpoints of settled weights."""
    config = a.config
    schedule = UpdateSchedule.from_config(config.learner)
    trainer: Trainer = InlineTrainer(agent.learner, schedule)
    lockstep = None
    if config.learner.schedule.overlap:
        trainer = lockstep = LockstepLearner(agent.learner, agent.actor, adds_per_step(config), schedule)
        a.stack.callback(lockstep.stop)
    acting = agent.actor
    Training(trainer.start(), lambda: acting.steps).attach(driver)
    a.checkpoint_every(driver, config.learner.schedule.checkpoint_every, done,
                       settle=lockstep.drain if lockstep is not None else None)  # the checkpoint holds settled weights
    return lockstep


def _settle(lockstep: LockstepLearner | None) -> None:
    """The last checkpoint holds settled weights (not after the lockstep learner failed)."""
    if lockstep is not None and lockstep.error is None:
        lockstep.drain()


def adds_per_step(config: Config) -> tuple[int, int]:
    """``(transitions, frames)`` the adder writes at most in one agent step: an episode's end flushes
    ``n_step`` transitions; its start writes the first observation's frames and the next one."""
    return config.learner.n_step + 1, config.observation.stack + 2


def game_title(config: Config) -> str:
    """The game a run played, for its picture: the Gymnasium id, else the map or the scenario."""
    return config.game.id if config.game.name == "gym" else config.game.map or config.game.scenario
