"""Typed, frozen configuration loaded from TOML with dotted overrides.

:mod:`explorer.config.schema` holds the settings (pydantic models, their defaults and the checks
across keys); :mod:`explorer.config.loader` loads them: the defaults, a TOML file merged over
them, then ``--set section.key=value`` overrides, validated, each value's origin named in the
errors. An unknown key or a wrong type is a :class:`ConfigError` naming the key and where it came
from. Every public name of both is importable from here.
"""

from explorer.config.loader import (
    MOVED_KEYS,
    capture_overrides,
    dump,
    load,
    missing_keys,
    quote,
    read_config_text,
    render_toml,
    toml_literal,
    tomllib,
)
from explorer.config.schema import (
    DERIVED_SEEDS,
    ENGINE_ARGS_ALLOWED,
    ENGINE_CVARS,
    ENGINE_FLAGS,
    ENGINE_NUMBER_FLAGS,
    GAME_DEFAULTS,
    HOTKEY_NAMES,
    MAP_NAME,
    MAX_SEED,
    NOVELTY_CNN_LAYERS,
    REACH_FRAME,
    ActionsConfig,
    CaptureConfig,
    Config,
    ConfigError,
    ControlConfig,
    GameConfig,
    LearnerConfig,
    LiveConfig,
    NetworksConfig,
    NoveltyConfig,
    ObservationConfig,
    PadButton,
    PadConfig,
    RecordConfig,
    RingConfig,
    RunConfig,
    ScheduleConfig,
    check_live_turn_rate,
    check_recorded_turn_rate,
    check_replay,
    config_problems,
    conv_layers_fitting,
    engine_args,
    explore_warnings,
    frame_shape,
    game_defaults,
    hotkey_name,
    replay_problems,
    replay_slots,
    replay_warnings,
    turn_rate,
    worker_problems,
)

__all__ = [
    "DERIVED_SEEDS", "ENGINE_ARGS_ALLOWED", "ENGINE_CVARS", "ENGINE_FLAGS", "ENGINE_NUMBER_FLAGS", "GAME_DEFAULTS", "HOTKEY_NAMES",
    "MAP_NAME", "MAX_SEED", "MOVED_KEYS", "NOVELTY_CNN_LAYERS", "REACH_FRAME", "ActionsConfig", "CaptureConfig", "Config",
    "ConfigError", "ControlConfig", "GameConfig", "LearnerConfig", "LiveConfig", "NetworksConfig", "NoveltyConfig",
    "ObservationConfig", "PadButton", "PadConfig", "RecordConfig", "RingConfig", "RunConfig", "ScheduleConfig",
    "capture_overrides", "check_live_turn_rate", "check_recorded_turn_rate", "check_replay", "config_problems",
    "conv_layers_fitting", "dump", "engine_args", "explore_warnings", "frame_shape", "game_defaults", "hotkey_name", "load",
    "missing_keys", "quote", "read_config_text", "render_toml", "replay_problems", "replay_slots",
    "replay_warnings", "toml_literal", "tomllib", "turn_rate", "worker_problems",
]
