"""``explorer replay``: learn from recorded sessions with no game running, or evaluate a checkpoint on them.

Both run the driver on a :class:`~explorer.envs.sessions.env.SessionEnv`:

- **training**: the learning actor replays the recorded actions (and the recorded decision
  boundaries) through its novelty scoring, context and adder, exactly as it would have
  live, and an inline learner trains on its schedule;
- **evaluation**: a deterministic actor from a checkpoint acts on the recorded frames; its
  context follows what was recorded (the recorded action where known), so it sees the
  input it would have seen in the run that recorded the session; its actions are compared
  with the recorded ones and the novelty of the frames is plotted.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from explorer.agent.actor import LearningActor, RecordedActor
from explorer.agent.checkpoint import CheckpointError, latest_checkpoint
from explorer.agent.memory import check_memory
from explorer.agent.schedule import UpdateSchedule
from explorer.agent.trainer import InlineTrainer
from explorer.config import Config, check_recorded_turn_rate, check_replay
from explorer.core import Step, Stopped, action_names
from explorer.envs.sessions.env import SessionEnv
from explorer.envs.sessions.format import SessionError
from explorer.envs.sessions.reader import Session, check_buttons, find_sessions, open_sessions
from explorer.files import atomic_save, atomic_write, json_text
from explorer.run.assembly import Assembly
from explorer.run.driver import Controls, Driver, Transition
from explorer.run.observers import Training
from explorer.run.plots import plot_actions, plot_history, plot_novelty
from explorer.run.safety import Kept, signal_number, stop_on_signals


def _needs_actions(sessions: Sequence[Session]) -> None:
    missing = [str(s.path) for s in sessions if not s.has_actions]
    if missing:
        raise SessionError(f"{', '.join(missing)}: no recorded actions (a person played; the stick values are unknown), "
                           "so there is nothing to learn Q(obs, action) from; replay sessions recorded by the agent")


class _RecordedSteps(RecordedActor):
    """The recorded actions, each checked: a step to learn from without a finite action is damaged data."""

    def act(self, step: Step) -> np.ndarray:
        action = super().act(step)
        if not np.isfinite(action).all():
            raise SessionError(f"session {step.info['session']} step {step.info['index']} has no recorded action "
                               f"(or a non-finite one, {action.tolist()}) in the middle of an episode: the session "
                               "is damaged or mixes steps a person played")
        return action


def recorded(sessions: Sequence[Session]) -> dict[str, dict[str, Any]]:
    """What each session's recorder kept about it (``meta.json``'s ``meta``: ``source``, ``config``), by path."""
    return {str(s.path): dict(s.info.meta) for s in sessions}


def frame_shape(sessions: Sequence[Session]) -> tuple[int, int, int]:
    for s in sessions:
        if s.frame_shape is not None:
            return tuple(int(x) for x in s.frame_shape)  # type: ignore[return-value]
    raise SessionError(f"no frames in {', '.join(str(s.path) for s in sessions)}")


def replay_train(config: Config, sessions: Sequence[str | Path | Session], run_path: str | Path, epochs: int = 1,
                 max_steps: int | None = None, checkpoint_every: int = 0, progress: bool = False,
                 log: Callable[[dict[str, Any]], None] | None = None, agent: Any = None) -> dict[str, Any]:
    """Replay recorded transitions through the learning agent (no game); log, checkpoint and plot.

    Novelty is what the agent computes from the recorded frames; the recorded reward is not used.

    Args:
      config: the merged config.
      sessions: session paths (or open sessions), one frame shape.
      run_path: the run directory; gets ``tb/`` (TensorBoard), ``checkpoints/``, ``training.png``.
      epochs: passes over the sessions.
      max_steps: stop after this many transitions.
      checkpoint_every: also checkpoint every this many transitions (0: only at the end).
      progress: show a progress bar.
      log: also called with each metrics record (e.g. ``RunDir.log``).
      agent: the learning agent to train (:func:`explorer.run.builder.build_agent`; default: a new one).

    Returns:
      A summary: ``transitions``, ``updates`` (transitions that trained), ``seconds``, ``checkpoint``, ``plot``,
      ``tensorboard``, ``stopped_by`` (``end of data``, ``steps``, or the signal that stopped it) and ``kept``.

    Raises:
      SessionError: a session is damaged; what was trained before the damage is checkpointed first,
        and the message names the checkpoint.
    """
    check_memory(config)  # the learner's buffers fit in the memory free, before anything is read
    sessions = open_sessions(sessions)
    _needs_actions(sessions)
    check_buttons(sessions, config.pad.buttons)
    frames = frame_shape(sessions)
    check_replay(frames, config.observation.stack, config.learner)  # the frames come from the sessions
    check_recorded_turn_rate(config, recorded(sessions))  # and the heading window's turns from their game
    run_path = Path(run_path)
    run_path.mkdir(parents=True, exist_ok=True)
    # the command seeds once for replay and evaluation; run.threads is explore's and play's
    with Assembly(config, "replay", setup=False) as a:  # Ctrl-C and SIGTERM stop at a transition, keeping what it learned
        a.use_run_path(run_path)
        a.learning_agent(frames, agent=agent)
        return _replay_train(a, sessions, run_path, epochs, max_steps, checkpoint_every, progress, log)


class _Replayed:
    """What a replay has trained so far: transitions, updates and the logged metrics' windows and history."""

    def __init__(self, log_every: int, log: Callable[[dict[str, Any]], None] | None):
        self.steps = self.updates = 0
        self.log_every = log_every
        self.log = log
        self.history: dict[str, list[tuple[int, float]]] = {}
        self.window: dict[str, list[float]] = {}

    def on_step(self, t: Transition) -> None:
        self.steps += 1
        self.updates += "critic_loss" in t.metrics
        for k, v in t.metrics.items():
            self.window.setdefault(k, []).append(float(v))
        if self.steps % self.log_every == 0:
            self.flush()

    def flush(self) -> None:
        """Log the window's means (to TensorBoard, the history and ``log``)."""
        record = _flush_metrics(self.window, self.history, self.steps)
        if self.log is not None:
            self.log(record)


def _replay_train(a: Assembly, sessions: list[Session], run_path: Path, epochs: int, max_steps: int | None,
                  checkpoint_every: int, progress: bool, log: Callable[[dict[str, Any]], None] | None) -> dict[str, Any]:
    import tensorflow as tf

    config, agent, checkpointer = a.config, a.agent, a.checkpointer
    trainer = Training(InlineTrainer(agent.learner, UpdateSchedule.from_config(config.learner)), lambda: agent.actor.steps)
    writer = tf.summary.create_file_writer(str(run_path / "tb"))
    bar = a.progress(None, max_steps or sum(s.steps for s in sessions) * epochs, progress)
    done = _Replayed(config.run.log_every, log)
    t0 = time.monotonic()

    def driver() -> Driver:
        env = SessionEnv(sessions, config.observation.stack, config.ring.capacity, config.pad.buttons)
        d = Driver(env, _RecordedSteps(agent.actor), a.controls)
        trainer.attach(d)
        d.on_step(done.on_step)
        a.checkpoint_every(d, checkpoint_every, lambda: done.steps)
        d.on_step(lambda t: bar.update(1))
        return d

    stopped_by, damaged = "end of data", None
    with writer.as_default():
        try:
            stopped_by = _epochs(driver, epochs, max_steps, done)
        except SessionError as err:  # a damaged chunk: what was trained before it is kept below
            damaged = err
        finally:
            bar.close()
            if done.window:
                done.flush()
            writer.close()
    step = done.steps
    if step and not (checkpoint_every and step % checkpoint_every == 0) and not checkpointer.failed:
        with a.signals.held():
            checkpointer.save(step)
    if damaged is not None:
        trained = f"the {step} transitions before it were trained; {a.kept}" if step else "nothing was trained"
        raise SessionError(f"{damaged}; replay stopped there: {trained}") from None
    if step == 0 and stopped_by == "end of data":
        raise SessionError(f"no transitions in {', '.join(str(s.path) for s in sessions)}")
    plot = plot_history(done.history, run_path / "training.png",
                        f"replay of {len(sessions)} session(s), {step} transitions")
    return {"transitions": step, "updates": done.updates,
            "seconds": round(time.monotonic() - t0, 2), "checkpoint": checkpointer.latest, "plot": str(plot),
            "tensorboard": str(run_path / "tb"), "final_metrics": {k: v[-1][1] for k, v in done.history.items()},
            "stopped_by": stopped_by, "kept": str(a.kept)}


def _epochs(driver: Callable[[], Driver], epochs: int, max_steps: int | None, done: _Replayed) -> str:
    """Run ``epochs`` passes over the sessions (a new driver each) up to ``max_steps``; returns what stopped it."""
    stopped_by = "end of data"
    for _ in range(epochs):
        left = None if max_steps is None else max_steps - done.steps
        if left is not None and left <= 0:
            return "steps"
        stopped_by = driver().run(max_steps=left).stopped_by
        if stopped_by not in ("end of data", "steps"):
            break  # a signal
    return stopped_by


def _flush_metrics(window: dict[str, list[float]], history: dict[str, list[tuple[int, float]]], step: int) -> dict[str, Any]:
    import tensorflow as tf

    record: dict[str, Any] = {"step": step}
    for k, values in window.items():
        if values:
            mean = float(np.mean(values))
            tf.summary.scalar(k, mean, step=step)
            history.setdefault(k, []).append((step, mean))
            record[k] = mean
    window.clear()
    return record


class EvaluationActor:
    """A deterministic learning actor on recorded frames, its context following the recorded actions.

    Where an action was recorded, the context takes it as the previous action (it is what
    happened); where none was (a person played), the actor's own.
    """

    def __init__(self, actor: LearningActor):
        self.actor = actor

    def act(self, step: Step) -> np.ndarray:
        return self.actor.act(step)

    def observe(self, step: Step, action: np.ndarray | None, next_step: Step) -> dict[str, float]:
        recorded = np.asarray(step.info["action"], np.float32)
        taken = recorded if np.isfinite(recorded).all() else action
        return self.actor.record(step, taken, next_step, starts=True, ends=True)


def find_checkpoint(checkpoint: str | Path) -> tuple[Path, str | None]:
    """The checkpoint folder, and the checkpoint in it (None: its newest), that a run directory,
    its ``checkpoints/`` folder or one checkpoint (``<run>/checkpoints/learner-N``) names.

    Raises:
      CheckpointError: there is no such path, it is neither, or the run wrote no checkpoint.
    """
    path = Path(checkpoint)
    hint = "give the run directory of an explore, play or replay run, or one of its checkpoints (<run>/checkpoints/learner-N)"
    name: str | None = None
    if (path / "checkpoints").is_dir():
        folder = path / "checkpoints"
    elif path.is_dir() and path.name == "checkpoints":
        folder = path
    elif re.fullmatch(r"learner-\d+(\.index)?", path.name) and path.parent.is_dir():
        folder, name = path.parent, str(path.with_suffix("") if path.suffix == ".index" else path)
        if not Path(f"{name}.index").is_file():
            raise CheckpointError(f"checkpoint {name} does not exist; the run's checkpoints are: "
                                  + (", ".join(sorted(p.stem for p in folder.glob("learner-*.index"))) or "none"))
    elif not path.exists():
        raise CheckpointError(f"{path} does not exist; {hint}")
    else:
        raise CheckpointError(f"{path} is neither a run directory (it has no checkpoints/ folder) nor a checkpoint; {hint}")
    if name is None and latest_checkpoint(folder) is None:
        raise CheckpointError(f"{folder} holds no checkpoint: the run stopped before it wrote one; {hint}")
    return folder, name


def restore_checkpoint(agent: Any, checkpoint: Path) -> int:
    """Restore a run directory's latest checkpoint, or one checkpoint (``<run>/checkpoints/learner-N``)."""
    folder, name = find_checkpoint(checkpoint)
    return agent.checkpointer(folder).restore(name)


def evaluate(config: Config, sessions: Sequence[str | Path | Session], checkpoint: str | Path,
             run_path: str | Path) -> dict[str, Any]:
    """Run a checkpoint's deterministic policy over recorded sessions: novelty over time and its actions
    against the recorded ones.

    Returns:
      The summary written to ``<run_path>/evaluation.json`` (``evaluation.npz``, ``tb/``,
      ``novelty.png`` and ``actions.png`` beside it).
    """
    from explorer.run.builder import build_agent

    check_memory(config)
    sessions = open_sessions(sessions)
    check_buttons(sessions, config.pad.buttons, fix="the checkpoint's policy holds the buttons of the settings in "
                  "use; evaluate it on sessions recorded with those buttons")
    check_recorded_turn_rate(config, recorded(sessions))
    find_checkpoint(checkpoint)  # before the agent is built: a wrong path is said at once
    agent = build_agent(config, frame_shape(sessions), deterministic=True)
    restore_checkpoint(agent, Path(checkpoint))
    agent.actor.new_episode = True
    return evaluate_actor(config, sessions, EvaluationActor(agent.actor), run_path)


def evaluate_actor(config: Config, sessions: Sequence[Session], actor: Any, run_path: str | Path) -> dict[str, Any]:
    """The evaluation loop and its figures, for any actor whose ``observe`` scores novelty."""
    import tensorflow as tf

    run_path = Path(run_path)
    run_path.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[Any]] = {"policy": [], "recorded": [], "reward": [], "novelty": [], "first": []}

    def on_step(t: Transition) -> None:
        assert t.action is not None
        rows["policy"].append(t.action)
        rows["recorded"].append(np.asarray(t.step.info["action"], np.float32))
        rows["reward"].append(t.step.info["reward"])
        rows["first"].append(t.step.first)
        if "novelty" in t.metrics:
            rows["novelty"].append(t.metrics["novelty"])

    with stop_on_signals(Controls(), Kept(run_dir=run_path)) as signals:  # Ctrl-C: evaluate what was seen so far
        env = SessionEnv(sessions, config.observation.stack, config.ring.capacity, config.pad.buttons)
        driver = Driver(env, actor, signals.controls)
        driver.on_step(on_step)
        stopped_by = driver.run().stopped_by
    if not rows["policy"]:
        if (signum := signal_number(stopped_by)) is not None:
            raise Stopped(f"stopped by {stopped_by} before the first transition; nothing was evaluated", signum)
        raise SessionError(f"no transitions in {', '.join(str(s.path) for s in sessions)}")
    pa, ra = np.stack(rows["policy"]), np.stack(rows["recorded"])
    rr = np.asarray(rows["reward"], np.float32)
    nov = np.asarray(rows["novelty"], np.float32)
    firsts = np.asarray(rows["first"])
    known = ~np.isnan(ra).any(axis=1)
    names = action_names(config.pad.buttons)
    summary: dict[str, Any] = {"transitions": len(pa), "sessions": [str(s.path) for s in sessions],
                               "policy_action_mean": dict(zip(names, pa.mean(0).tolist(), strict=True)),
                               "policy_action_std": dict(zip(names, pa.std(0).tolist(), strict=True)),
                               "recorded_actions": int(known.sum()), "stopped_by": stopped_by}
    if known.any():
        err = pa[known] - ra[known]
        summary["action_mse"] = dict(zip(names, np.mean(err**2, 0).tolist(), strict=True))
        agree = np.mean(np.sign(pa[known]) == np.sign(ra[known]), 0)
        summary["action_sign_agreement"] = dict(zip(names, agree.tolist(), strict=True))
    if np.isfinite(rr).any():
        summary["recorded_reward_mean"] = float(np.nanmean(rr))
    if len(nov):
        summary["novelty_mean"] = float(nov.mean())
        summary["novelty_last_100_mean"] = float(nov[-100:].mean())
    writer = tf.summary.create_file_writer(str(run_path / "tb"))
    with writer.as_default():
        for i in range(len(pa)):
            if len(nov):
                tf.summary.scalar("eval/novelty", nov[i], step=i)
            if known[i]:
                tf.summary.scalar("eval/action_mse", float(np.mean((pa[i] - ra[i]) ** 2)), step=i)
    writer.close()
    atomic_save(run_path / "evaluation.npz", lambda tmp: np.savez(tmp, policy_action=pa, recorded_action=ra,
                                                                  recorded_reward=rr, novelty=nov, first=firsts))
    summary["novelty_png"] = str(plot_novelty(nov, rr, firsts, run_path / "novelty.png"))
    summary["actions_png"] = str(plot_actions(pa, ra, run_path / "actions.png"))
    atomic_write(run_path / "evaluation.json", json_text(summary, indent=2) + "\n")
    return summary


def replay_sessions(paths: Sequence[str | Path]) -> list[Session]:
    """The sessions ``explorer replay`` is given, opened: each path a session directory or a folder of them.

    Raises:
      SessionError: no session among ``paths``, or one cannot be opened.
    """
    found = find_sessions(paths)
    if not found:
        raise SessionError(f"no sessions in {' '.join(map(str, paths))}")
    return open_sessions(found)


def evaluate_run(config: Config, sessions: Sequence[Session], checkpoint: str | Path) -> tuple[Path, dict[str, Any]]:
    """``explorer replay --evaluate``: seed, then :func:`evaluate` ``checkpoint`` on ``sessions`` in a new
    ``evaluate`` run directory (removed again if it fails before writing), which gets the summary.

    Returns:
      The run directory, and the summary with ``kept`` (what the run directory keeps) added.
    """
    from explorer.run.builder import seed_everything
    from explorer.run.rundir import RunDir

    seed_everything(config.run.seed)
    with RunDir(config.run.dir, "evaluate", config) as run:
        summary = evaluate(config, sessions, checkpoint, run.path)
        run.write_summary(summary)
    summary["kept"] = f"kept the evaluation of them in run directory {run.path}"
    return run.path, summary


def replay_run(config: Config, sessions: Sequence[Session], epochs: int = 1, max_steps: int | None = None,
               checkpoint_every: int = 0, progress: bool = False) -> tuple[Path, dict[str, Any]]:
    """``explorer replay``: seed, then :func:`replay_train` on ``sessions`` in a new ``replay`` run directory,
    which gets the summary (with the sessions' paths) and the metrics log.

    Returns:
      The run directory and the summary.
    """
    from explorer.run.builder import seed_everything
    from explorer.run.rundir import RunDir

    seed_everything(config.run.seed)
    with RunDir(config.run.dir, "replay", config) as run:
        summary = replay_train(config, sessions, run.path, epochs=epochs, max_steps=max_steps,
                               checkpoint_every=checkpoint_every, progress=progress, log=run.log)
        summary["sessions"] = [str(s.path) for s in sessions]
        run.write_summary(summary)
    return run.path, summary
