"""Settings a run directory's own ``config.toml`` may not choose for the run that reads it.

A run directory can come from anyone (a download, a colleague's share). Its ``config.toml``
sets how a resumed run (``explore --resume``, ``play --resume``) or an evaluation
(``replay --evaluate``) plays and learns, but not where else explorer writes, which machines it
talks to, which Python module it imports or how the live pad's safety works (its stop and pause keys,
watchdog, countdown): those settings (:data:`PLACES`) are taken from the
command line (``--out``, ``--record``, ``--address``, ``--config``, ``--set``) or the defaults, never
from the file. What else a run directory may hold, and what is refused, is in ``docs/security.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from explorer import config as config_mod
from explorer.config import Config

#: settings naming something outside the run: a folder written to, a Ray cluster joined, a module imported, the
#: arguments handed to an installed Gymnasium env's constructor (which may name files of its own); and the live
#: pad's safety settings, which are the person's at the pad, never a file's to loosen
PLACES = ("run.dir", "record.dir", "run.address", "game.module", "game.kwargs",
          "control.stop_key", "control.pause_key", "control.watchdog_ticks", "control.countdown_s",
          "control.pause_unfocused")




def without_places(config: Config) -> tuple[Config, dict[str, Any]]:
    """``config`` (a run's own settings) with :data:`PLACES` back at their defaults, and what it had set
    them to (setting -> value) where that differed."""
    defaults = Config()
    dropped = {key: config.setting(key) for key in PLACES if config.setting(key) != defaults.setting(key)}
    if dropped:
        config = config.replace(**{key: defaults.setting(key) for key in dropped})
    return config, dropped


#: dropped without a word: where a new run directory goes (the command prints the one it made)
_QUIET = ("run.dir",)


def _toml(value: Any) -> str:
    """``value`` (a setting's) as a TOML value for ``--set``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{config_mod.quote(str(k))} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return config_mod.quote(str(value))


def _set(key: str, value: Any) -> str:
    """The ``--set`` that gives ``key`` the ``value`` (a table in shell quotes)."""
    if isinstance(value, dict):
        return f"--set '{key}={_toml(value)}'"
    return f"--set {key}={_toml(value)}"


def place_notes(run_config: str | Path, dropped: dict[str, Any], config: Config) -> list[str]:
    """One line per setting the run's file set that the run goes without: those the command line left at
    their defaults (``config`` is what the run goes on with), but ``run.dir``."""
    defaults = Config()
    return [f"{run_config} sets {key} = {value!r}, which a run's own file does not choose (a folder written to, "
            f"a cluster joined, a module imported, an installed env's arguments or a safety setting of the pad); "
            f"pass it on the command line "
            f"to use it "
            f"({_set(key, value)})"
            for key, value in dropped.items() if key not in _QUIET and config.setting(key) == defaults.setting(key)]
