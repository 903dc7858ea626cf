"""Resuming a run (``explore --resume``, ``play --resume``, ``replay --evaluate``): the run's own settings, the
command line's on top, and never a trained policy acting with settings other than those it learned with."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from explorer import config as config_mod
from explorer.config import Config, ConfigError

#: the settings that give a trained policy's inputs and outputs their meaning: what it sees (the observation, the
#: novelty averages and episode-step fraction of its context), what its outputs do (stick range and prior, the
#: sticks and buttons they reach and how), and its networks' shapes. A resume that changed one would act with a
#: policy on inputs or outputs it was not trained on.
POLICY_SETTINGS = (
    "observation.width", "observation.height", "observation.grayscale", "observation.stack",
    "pad.camera_stick", "pad.walk_stick", "pad.invert_camera_y", "pad.invert_walk_y", "pad.buttons", "pad.tap_gap",
    "learner.algo", "learner.actions.action_low", "learner.actions.action_high", "learner.actions.action_prior", "learner.action_repeat",
    "learner.networks.context", "learner.networks.view_strips", "learner.networks.shared_encoder", "learner.networks.filters", "learner.networks.hidden",
    "learner.networks.feature", "learner.actions.plan_candidates", "learner.actions.plan_score", "learner.networks.oracle_map", "learner.networks.echo_units", "learner.networks.recurrent_units", "learner.networks.recurrent_window", "learner.actions.residual", "learner.actions.option_steps",
    "novelty.signal", "novelty.embedding", "novelty.episodic_reward", "novelty.lifelong", "novelty.histogram_bins",
    "novelty.embed_dim",
    "game.episode_steps", "game.actions",
)


def _value(config: Config, key: str) -> Any:
    value = config.setting(key)
    return list(value) if isinstance(value, tuple) else value


def _shown(value: Any) -> str:
    return json.dumps(value)


def policy_changes(trained: Config, config: Config) -> dict[str, tuple[Any, Any]]:
    """The :data:`POLICY_SETTINGS` ``config`` gives other values than ``trained``: key -> (trained, now)."""
    return {key: (_value(trained, key), _value(config, key)) for key in POLICY_SETTINGS
            if _value(trained, key) != _value(config, key)}


def resumed_config(run_dir: str | Path, config_file: str | Path | None, overrides: list[str], runs: str,
                   flag: str = "--resume") -> Config:
    """The settings of a resumed run: the run's ``config.toml``, then ``config_file``, then ``overrides``.

    The run's file does not choose places outside the run (:data:`explorer.run.trust.PLACES`: folders
    written to, the Ray cluster, a module imported); one line says what it set that is not taken.

    Args:
      run_dir: the run directory to resume.
      config_file: a TOML file given with ``--config``, merged over the run's settings.
      overrides: ``--set`` and the command's own options, merged last.
      runs: the kinds of run the command resumes, for the message when ``run_dir`` is none
        (``"an explore run"``).
      flag: the option that named ``run_dir``, for the messages.

    Raises:
      ConfigError: ``run_dir`` holds no config, or the merged settings change one of
        :data:`POLICY_SETTINGS` (one line naming each, with the run's value and the new one).
    """
    from explorer.run.trust import place_notes, without_places

    trained, dropped = without_places(run_settings(run_dir, runs, flag))  # the file picks no place outside the run
    run_config = Path(run_dir) / "config.toml"
    newer = config_mod.missing_keys(run_config, worth_telling=True)
    if newer:
        print(f"explorer: {run_config} predates settings it does not set, which take today's defaults or, where "
              "those changed what a run does, what its code ran with: "
              + ", ".join(f"{k} = {v}" for k, v in newer.items())
              + "; to resume with other values, pass them with --set", file=sys.stderr)
    config = trained
    if config_file:
        config = config_mod.load(config_file, [], base=config)
    config = config_mod.load(None, overrides, base=config)
    for note in place_notes(run_config, dropped, config) if flag == "--resume" else ():  # an evaluation uses none
        print(f"explorer: {note}", file=sys.stderr)
    given = " or ".join(name for name, used in (("--config", config_file), ("--set", overrides)) if used)
    refuse_policy_changes(run_dir, trained, config, given, flag)
    return config


def run_settings(run_dir: str | Path, runs: str = "a run", flag: str = "--resume") -> Config:
    """The settings a run directory's ``config.toml`` holds (validated as any config file).

    Raises:
      ConfigError: ``run_dir`` holds no ``config.toml`` (the message asks for the directory of ``runs``), or it
        is not a valid config.
    """
    run_config = Path(run_dir) / "config.toml"
    if not run_config.is_file():
        raise ConfigError(f"{flag} {run_dir}: no config.toml there; give the run directory of {runs}")
    return config_mod.load(run_config, [], run_file=True)  # an older explorer's keys load without a word


def refuse_policy_changes(run_dir: str | Path, trained: Config, config: Config, given: str = "",
                          flag: str = "--resume") -> None:
    """Raise a one-line :class:`ConfigError` when ``config`` changes a :data:`POLICY_SETTINGS` value of the run
    ``run_dir`` (whose settings are ``trained``), naming each with the run's value and the new one.

    Args:
      given: where the changes came from (``"--set"``), for the message.
      flag: the option that named ``run_dir``, for the message.
    """
    changed = policy_changes(trained, config)
    if not changed:
        return
    listed = "; ".join(f"{key} = {_shown(new)} (the run's: {_shown(old)})" for key, (old, new) in changed.items())
    raise ConfigError(f"{flag} {run_dir}: {given or 'the settings'} change what its trained policy sees or does: "
                      f"{listed}; a trained policy acts only with the settings it was trained with: drop "
                      f"{'that setting' if len(changed) == 1 else 'those settings'}, or start a new run")


def command_config(resume: str | Path | None, config_file: str | Path | None, overrides: list[str], runs: str,
                   flag: str = "--resume", *, game: bool = False) -> Config:
    """A command's settings: :func:`resumed_config` of the run ``resume`` names, or without one the defaults,
    then ``config_file``, then ``overrides``.

    Args:
      resume: the run directory to take the settings of, or None for a new run.
      config_file: a TOML file given with ``--config``.
      overrides: ``--set`` and the command's own options, merged last.
      runs: the kinds of run the command resumes, for the messages (see :func:`resumed_config`).
      flag: the option that named ``resume``, for the messages.
      game: the command plays the built-in game: a new run takes the settings it brings
        (:data:`~explorer.config.schema.GAME_DEFAULTS`) where nothing sets them; a resumed run has its own.
    """
    if resume:
        return resumed_config(resume, config_file, overrides, runs, flag)
    return config_mod.load(config_file, overrides, game=game)


def checkpoint_config(checkpoint: str | Path) -> Path | None:
    """The ``config.toml`` of the run a checkpoint belongs to: ``checkpoint`` a run directory, or a checkpoint
    inside one (``<run>/checkpoints/learner-N``); None when there is none."""
    checkpoint = Path(checkpoint)
    for parent in (checkpoint, *list(checkpoint.parents)[:2]):
        if (parent / "config.toml").is_file():
            return parent / "config.toml"
    return None


def evaluation_config(checkpoint: str | Path | None, config_file: str | Path | None, overrides: list[str]) -> Config:
    """The settings of ``explorer replay``: with ``checkpoint`` (``--evaluate``) inside a run, that run's, as
    :func:`resumed_config` merges them (the checkpoint's policy is evaluated with the settings it was trained
    with); else the defaults, then ``config_file``, then ``overrides``."""
    trained = checkpoint_config(checkpoint) if checkpoint is not None else None
    return command_config(trained.parent if trained is not None else None, config_file, overrides, "a run", "--evaluate")
