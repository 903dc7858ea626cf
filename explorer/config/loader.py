"""Loading a config: defaults, then a TOML file, then ``--set section.key=value`` overrides, validated.

Each value's origin (the file or ``--set`` it came from) is tracked, so an unknown key, a wrong
type or a contradiction between settings is a :class:`ConfigError` naming the key and where it
came from. Settings that moved (:data:`MOVED_KEYS`, the learner's into its groups) load under
their old keys too, migrated here as each source is read. Also the TOML writers (a run directory's
``config.toml``, the commented ``config.toml`` at the top of the repository) and the command-line
helpers that build overrides.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import tomli_w

from explorer.config.schema import Config, ConfigError, game_defaults


def quote(text: str) -> str:
    """``text`` as a TOML string literal, for building ``--set`` overrides."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def capture_overrides(window: str | None, region: str | None) -> list[str]:
    """Overrides for the ``--window TITLE`` and ``--region L,T,W,H`` command-line options."""
    extra: list[str] = []
    if window:
        extra += ['capture.source="window"', f"capture.window_title={quote(window)}"]
    if region:
        try:
            left, top, width, height = (int(v) for v in region.split(","))
        except ValueError:
            raise ConfigError(f"--region {region!r} is not L,T,W,H (four integers, pixels)") from None
        extra += ['capture.source="region"', f"capture.left={left}", f"capture.top={top}",
                  f"capture.width={width}", f"capture.height={height}"]
    return extra


def toml_literal(value: Any) -> str:
    if isinstance(value, dict):  # an inline table: tomli_w writes a dict as a [section] of its own
        return "{" + ", ".join(f"{toml_literal(str(k))} = {toml_literal(v)}" for k, v in value.items()) + "}"
    text = tomli_w.dumps({"v": value})
    return text.split("=", 1)[1].strip()


def _parse_override(text: str) -> tuple[list[str], Any]:
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form section.key=value")
    key, raw = text.split("=", 1)
    path = key.strip().split(".")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()  # a bare word is taken as a string
    return path, value


def _merge(into: dict[str, Any], path: list[str], value: Any, origin: str) -> None:
    node = into
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{'.'.join(path)} ({origin}): {part} is not a section")
        node = child
    node[path[-1]] = value


def _model_at(path: list[str] | tuple[str, ...]) -> type[BaseModel] | None:
    """The section or group model the dotted ``path`` names (``["learner", "schedule"]``), None when it names none."""
    model: type[BaseModel] = Config
    for part in path:
        field = model.model_fields.get(part)
        sub = field.annotation if field is not None else None
        if not (isinstance(sub, type) and issubclass(sub, BaseModel)):
            return None
        model = sub
    return model


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"section.key": value}``, ``{"learner.schedule.key": value}`` inside a group; a table value of a
    setting (``game.kwargs``) stays whole, an empty one included, and so does a table the schema does not know."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and _model_at(f"{prefix}{key}".split(".")) is not None:
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


#: settings that moved into the learner's groups, old key -> new key. The old keys still load: from a config
#: file or ``--set`` with one line on stderr (once per key), from a run directory's own ``config.toml`` silently.
MOVED_KEYS: dict[str, str] = {f"learner.{key}": f"learner.{group}.{key}" for group, keys in (
    ("networks", ("hidden", "feature", "filters", "augment", "shared_encoder", "context", "view_strips",
                  "oracle_map")),
    ("actions", ("action_prior", "action_low", "action_high", "noise_rho", "random_options", "option_steps",
                 "residual", "plan_candidates", "plan_score", "model_weight")),
    ("schedule", ("batch_size", "update_every", "warmup_steps", "replay_mb", "checkpoint_every", "overlap",
                  "publish_every", "lag_steps")),
    ("live", ("between_ticks", "max_updates_per_s")),
) for key in keys}

_told: set[str] = set()  # the old keys whose new name was printed (once per key and process)


def _moved(given: list[tuple[list[str], Any]], origin: str, quiet: bool = False) -> list[tuple[list[str], Any]]:
    """``given`` (one source's key paths and values, in order) with the :data:`MOVED_KEYS` renamed.

    Args:
      origin: the source (a file, ``--set``), for the messages.
      quiet: the source is a run directory's own file (written by an older explorer): no line on stderr.

    Raises:
      ConfigError: the source gives a setting under both its old and its new key.
    """
    old_of: dict[str, str] = {}  # new key -> the old key it was given as
    out: list[tuple[list[str], Any, bool]] = []  # key path, value, given by its old key
    for path, value in given:
        new = MOVED_KEYS.get(".".join(path[:2]))
        if new is None:
            out.append((path, value, False))
        else:
            old_of[new] = ".".join(path[:2])
            out.append(([*new.split("."), *path[2:]], value, True))
    for path, _, by_old in out:
        key = ".".join(path)
        new = next((n for n in old_of if key == n or key.startswith(n + ".")), None)
        if new is not None and not by_old:
            raise ConfigError(f"{old_of[new]} and {new} (from {origin}) are one setting given twice: "
                              f"{old_of[new]} is its old name; keep {new} only")
    for new, old in old_of.items():
        if not quiet and old not in _told:
            _told.add(old)
            print(f"explorer: {old} is now {new} (the old key still works)", file=sys.stderr)
    return [(path, value) for path, value, _ in out]


def _override(text: str) -> list[tuple[list[str], Any]]:
    """One ``--set``: its key path and value; a table given to a section or group (``learner.schedule={...}``)
    as one key path per setting in it."""
    path, value = _parse_override(text)
    if not (isinstance(value, dict) and _model_at(path) is not None):
        return [(path, value)]
    tree: dict[str, Any] = value
    for part in reversed(path):
        tree = {part: tree}
    return [(key.split("."), v) for key, v in _flatten(tree).items()]


#: settings added after runs were written, each with the value that reproduces a run written before it
#: existed (a run directory's ``config.toml`` holds every setting, so one without the key is older)
ADDED_SETTINGS: dict[str, Any] = {"novelty.heading_window": 0.0, "novelty.turn_rate": 0.0,
                                 "learner.actions.plan_from_policy": 0, "learner.actions.replan_below": 0.0,
                                 "learner.actions.plan_memory": 0.0, "learner.actions.press_share": 0.5,
                                 "learner.actions.return_share": 0.0, "learner.networks.echo_units": 0,
                                 "learner.networks.recurrent_units": 0, "learner.networks.recurrent_window": 16,
                                 "learner.actions.reach_weights": "", "learner.actions.plan_route": 0,
                                 "learner.actions.route_after": 0}


def load(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = (),
         base: Config | None = None, *, run_file: bool = False, game: bool = False) -> Config:
    """Load a config: defaults (or ``base``), then the TOML file, then overrides.

    Settings given under their old keys (:data:`MOVED_KEYS`: ``warmup_steps`` of ``[learner]``) load as their
    new ones (``learner.schedule.warmup_steps``); each old key says so once on stderr.

    Args:
      path: a TOML file, or None for the defaults alone.
      overrides: ``section.key=value`` strings; values are TOML literals, bare
        words are strings.
      base: the config to start from instead of the defaults.
      run_file: ``path`` is a run directory's own ``config.toml``, written by explorer (an older one
        wrote the old keys): its old keys load without a word, and a setting it lacks
        (:data:`ADDED_SETTINGS`) takes the value the code that wrote it ran with.
      game: the command plays the built-in game ``game.name`` names (``explorer explore``, ``explorer play
        --game``): the settings that game brings (:func:`~explorer.config.schema.game_defaults`) replace the
        defaults of those the file and the overrides leave unset.

    Returns:
      The validated, frozen :class:`Config`.

    Raises:
      ConfigError: a missing, unreadable or malformed file, an unknown key, a wrong type, a setting
        given under its old and its new key in one file or one command line, or settings that
        contradict each other (:func:`~explorer.config.schema.config_problems`).
        Whether a run of the config fits in the memory free is not checked here: that depends
        on the machine, and the modes check it as they start (:mod:`explorer.agent.memory`).
    """
    tree = (base or Config()).to_dict()
    origins: dict[str, str] = {}
    if path is not None:
        path = Path(path)
        given = [(key.split("."), value) for key, value in _flatten(_parse_file(path)).items()]
        keys = set()
        for keypath, value in _moved(given, str(path), quiet=run_file):
            _merge(tree, keypath, value, str(path))
            origins[".".join(keypath)] = str(path)
            keys.add(".".join(keypath))
        if run_file:  # written before a setting existed: the run goes on as the code that wrote it ran
            for key, value in ADDED_SETTINGS.items():
                if key not in keys:
                    _merge(tree, key.split("."), value, str(path))
                    origins[key] = str(path)
    for keypath, value in _moved([kv for text in overrides for kv in _override(text)], "--set"):
        _merge(tree, keypath, value, "--set")
        origins[".".join(keypath)] = "--set"
    if game and base is None:
        _game_defaults(tree, origins)
    kinds = _kind_problems(tree, origins)
    if kinds:
        raise ConfigError("invalid configuration: " + kinds[0] if len(kinds) == 1
                          else "invalid configuration:\n  " + "\n  ".join(kinds))
    try:
        config = Config.model_validate(tree)
    except ValidationError as err:
        lines = []
        for e in err.errors():
            key = ".".join(str(p) for p in e["loc"])
            # an element of a list or table setting (``learner.networks.filters.1``, ``game.actions.UP.a``) comes
            # from where that setting came from
            where = _origin(key, origins)
            if e["type"] == "extra_forbidden":
                section = key.rsplit(".", 1)[0] if "." in key else ""
                known = _known_keys(section)
                # a setting of another group of the same section (learner.networks.warmup_steps) says where it is
                name, top = key.rsplit(".", 1)[-1], key.split(".")[0]
                there = [k for k in _settings() if k.startswith(f"{top}.") and k.rsplit(".", 1)[-1] == name]
                hint = f"; {name} is {' or '.join(there)}" if there else ""
                lines.append(f"unknown key {key!r} (from {where}); known keys here: {', '.join(known)}{hint}")
            elif e["type"] == "value_error" and isinstance(e.get("input"), dict):  # a check across keys
                for problem in e["msg"].removeprefix("Value error, ").splitlines():
                    lines.append(f"{problem} ({_origins_of(problem, origins)})")
            else:
                lines.append(f"{key} (from {where}): {e['msg']}, got {e.get('input')!r}")
        if len(lines) == 1:
            raise ConfigError(f"invalid configuration: {lines[0]}") from None
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines)) from None
    return config


def _game_defaults(tree: dict[str, Any], origins: dict[str, str]) -> None:
    """Merge into ``tree`` the settings its game brings that no source set (values of a wrong type leave
    the game's settings out: validation names them)."""
    game, obs = tree.get("game", {}), tree.get("observation", {})
    try:
        frame = (int(obs["height"]), int(obs["width"]), 1 if obs["grayscale"] is True else 3)
        brought = game_defaults(str(game["name"]), frame)
    except (KeyError, TypeError, ValueError):
        return
    for key, value in brought.items():
        if key not in origins:
            _merge(tree, key.split("."), value, f"game.name = {game['name']}")
            origins[key] = f"the defaults of game.name = {game['name']}"


def _origin(key: str, origins: dict[str, str]) -> str:
    """Where the setting ``key`` (or the setting holding it: ``game.actions.UP.a``) came from."""
    parts = key.split(".")
    return next((origins[k] for k in (".".join(parts[:n]) for n in range(len(parts), 0, -1)) if k in origins),
                "defaults")


def _kind_problems(tree: dict[str, Any], origins: dict[str, str]) -> list[str]:
    """Given settings of the wrong kind that validation would quietly convert: a switch given a number
    or a word (``game.visible = 1``), a number given a switch (``run.steps = true`` would be 1 step)."""
    defaults = _flatten(Config().model_dump(mode="json"))
    problems = []
    for key, value in _flatten(tree).items():
        if key not in origins or key not in defaults:
            continue  # an unknown key is reported by validation
        default, where = defaults[key], origins[key]
        if isinstance(default, bool) and not isinstance(value, bool):
            problems.append(f"{key} (from {where}): takes true or false, got {value!r}")
        elif isinstance(default, (int, float)) and not isinstance(default, bool) and isinstance(value, bool):
            problems.append(f"{key} (from {where}): takes a number, got {str(value).lower()}")
        elif (isinstance(default, list) and isinstance(value, list)
              and any(isinstance(v, bool) for v in value) and not any(isinstance(v, bool) for v in default)):
            problems.append(f"{key} (from {where}): takes numbers, got {value!r}")
    return problems


def read_config_text(path: str | Path) -> str:
    """The text of a TOML config file, or a one-line :class:`ConfigError` saying what is wrong with the file.

    A UTF-8 byte-order mark (as Windows editors write) is dropped.
    """
    path = Path(path)
    hint = "pass --config with the path of a TOML file"
    try:
        if path.is_dir():
            inside = path / "config.toml"
            raise ConfigError(f"config file {path} is a folder, not a file; {hint}"
                              + (f", such as {inside}" if inside.is_file() else ""))
        if not path.exists():
            raise ConfigError(f"config file {path} does not exist; {hint}")
        if not path.is_file():
            raise ConfigError(f"config file {path} is not a regular file; {hint}")
        data = path.read_bytes()
    except PermissionError:
        raise ConfigError(f"config file {path} cannot be read: permission denied; make it readable "
                          f"(chmod u+r {path}) or {hint}") from None
    except OSError as err:
        raise ConfigError(f"config file {path} cannot be read: {err.strerror or err}; {hint}") from None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"config file {path} is UTF-16 text (as PowerShell's > writes it); save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise ConfigError(f"config file {path} is not UTF-8 text (byte 0x{data[err.start]:02x} on line {line}); "
                          f"save it as UTF-8 or {hint}") from None


def _parse_file(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(read_config_text(path))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None


_KEY = re.compile(r"(?<![\w.])([a-z_]+(?:\.[a-z_0-9]+)+)")  # a dotted setting name in a message


def _settings(model: type[BaseModel] = Config, prefix: str = "") -> list[str]:
    """Every setting's dotted key (``run.steps``, ``learner.schedule.warmup_steps``)."""
    out: list[str] = []
    for name in model.model_fields:
        sub = _model_at(f"{prefix}{name}".split("."))
        out += _settings(sub, f"{prefix}{name}.") if sub is not None else [f"{prefix}{name}"]
    return out


def _origins_of(text: str, origins: dict[str, str]) -> str:
    """Where the settings named in ``text`` came from: ``from --set``, or ``from --set: a.b; defaults: c.d``."""
    known = set(_settings())
    by_origin: dict[str, list[str]] = {}
    for name in dict.fromkeys(_KEY.findall(text)):
        parts = name.split(".")  # the setting a name starts with: learner.actions.action_low of ...action_low.0
        key = next((k for k in (".".join(parts[:n]) for n in range(len(parts), 1, -1)) if k in known), None)
        if key is not None and key not in by_origin.get(origins.get(key, "defaults"), []):
            by_origin.setdefault(origins.get(key, "defaults"), []).append(key)
    if len(by_origin) <= 1:
        return f"from {next(iter(by_origin), 'defaults')}"
    by_origin["defaults"] = by_origin.pop("defaults", [])  # the keys given somewhere come first
    return "; ".join(f"{o if o == 'defaults' else 'from ' + o}: {', '.join(keys)}"
                     for o, keys in by_origin.items() if keys)


def missing_keys(path: str | Path, worth_telling: bool = False) -> dict[str, Any]:
    """Settings a run's TOML file does not set (written by an older version, say), with the values
    ``load(path, run_file=True)`` gives them: today's defaults, or for :data:`ADDED_SETTINGS` the value the
    older code ran with; a setting the file gives under its old key (:data:`MOVED_KEYS`) is set.
    ``worth_telling`` leaves out the added settings whose older value is also today's default: the run goes
    on as it ran and as a new one would, so there is nothing to tell."""
    flat = [(key.split("."), value) for key, value in _flatten(_parse_file(Path(path))).items()]
    given = {".".join(keypath) for keypath, _ in _moved(flat, str(path), quiet=True)}
    return {k: ADDED_SETTINGS.get(k, v) for k, v in _flatten(Config().to_dict()).items()
            if k not in given and not (worth_telling and k in ADDED_SETTINGS and ADDED_SETTINGS[k] == v)}


def _known_keys(section: str) -> list[str]:
    """The keys of the section or group ``section`` (``learner.schedule``); the sections for any other."""
    model = _model_at(section.split(".")) if section else Config
    return sorted((model or Config).model_fields)


def dump(config: Config, path: str | Path) -> None:
    """Write the merged config as TOML (into a run directory)."""
    Path(path).write_text(tomli_w.dumps(config.to_dict()), encoding="utf-8")


def render_toml(config: Config | None = None) -> str:
    """The config as commented TOML: each section's and group's docstring and each key's description.

    ``config.toml`` at the top of the repository is this text for the defaults
    (``python tools/write_config.py`` regenerates it).
    """
    config = config or Config()
    lines = ["# explorer configuration: every setting with its default.",
             "# Load another file with --config PATH; override one key with --set section.key=value.", ""]
    for section in Config.model_fields:
        lines += _render_table(section, getattr(config, section), config.to_dict()[section])
    return "\n".join(lines)


def _render_table(name: str, part: BaseModel, values: dict[str, Any]) -> list[str]:
    """The TOML table ``[name]`` of the section or group ``part`` (``values``: its :meth:`Config.to_dict`), its
    groups after it as tables of their own."""
    lines = [f"[{name}]", f"# {(type(part).__doc__ or '').strip().splitlines()[0]}"]
    groups = []
    for key, sub in type(part).model_fields.items():
        value = getattr(part, key)
        if isinstance(value, BaseModel):
            groups.append(key)
            continue
        # a seed derived from run.seed is shown commented out: a copy of this file that sets it
        # would pin it, and run.seed would no longer move it
        derived = key not in values
        if not derived:
            value = values[key]
        literal = (f"[{', '.join(toml_literal(v) for v in value)}]" if isinstance(value, (list, tuple))
                   else toml_literal(value))
        rendered = f"{'# ' if derived else ''}{key} = {literal}"
        lines.append(f"{rendered:<40} # {sub.description}")
    lines.append("")
    for key in groups:
        lines += _render_table(f"{name}.{key}", getattr(part, key), values[key])
    return lines
