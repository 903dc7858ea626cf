"""What a learning run holds in memory, estimated from its settings, against the memory free.

A lower bound of the largest buffers (the replay, the frame ring, a batch, the networks' weights,
the novelty's memory, a recording chunk), sized as :mod:`explorer.agent.networks`,
:mod:`explorer.agent.replay` and :mod:`explorer.agent.novelty` size them. The modes check it
before a run starts (:func:`check_memory`); the config itself is valid on any machine.
"""

from __future__ import annotations

import math
from typing import Any

from explorer.agent.context import RecurrentInput
from explorer.agent.replay import replay_capacity
from explorer.config import Config, ConfigError, frame_shape


def _encoder_flat(config: Config) -> int:
    """Features a learner encoder flattens before its dense layer (3x3 stride-2 convs, no padding)."""
    h, w, c = frame_shape(config.observation)
    filters = config.learner.networks.filters
    for _ in filters:
        h, w = (h - 3) // 2 + 1, (w - 3) // 2 + 1
    return max(h, 1) * max(w, 1) * (filters[-1] if filters else c * config.observation.stack)


def _first_conv(config: Config) -> int:
    """Values one picture's first learner convolution outputs (0 without convolutions)."""
    h, w, _ = frame_shape(config.observation)
    f = config.learner.networks.filters
    return ((h - 3) // 2 + 1) * ((w - 3) // 2 + 1) * f[0] if f else 0


def memory_needed(config: Config) -> dict[str, int]:
    """Bytes of the largest things a learning run holds, by what holds them: a lower bound of its memory.

    ``replay``: the replay under ``learner.schedule.replay_mb`` (with the recurrent core's inputs in its contexts); ``ring``: the frame ring; ``batch``: one
    sampled batch (observations and next observations, as ``uint8`` and as the ``float32`` the
    encoders scale them to, and the first convolution's outputs of the encoder passes of an
    update: two with a shared encoder, else four); ``networks``: the largest weight matrices (``hidden x hidden`` of
    each critic, target and actor head, the dense layer of each encoder) with Adam's two copies
    of the trained ones, ``float32``; ``novelty``: the episodic memory and recent frames;
    ``record``: one chunk of frames when recording.
    """
    obs, learner, novelty = config.observation, config.learner, config.novelty
    frame_bytes = math.prod(frame_shape(obs))
    stacked = frame_bytes * obs.stack
    dense = _encoder_flat(config) * learner.networks.feature
    # trained (x3 with Adam): critic encoder, actor encoder unless shared; target encoder x1
    encoders = dense * (3 + 1 + (0 if learner.networks.shared_encoder else 3))
    heads = learner.networks.hidden**2 * (2 * 3 + 2 * 1 + 3)  # twin critic heads, twin target heads, actor head
    passes = 2 if learner.networks.shared_encoder else 4  # encoder passes forward per update
    dim = novelty.histogram_bins ** frame_shape(obs)[2] if novelty.embedding == "histogram" else novelty.embed_dim
    memory = novelty.episode_capacity * dim * 4 if novelty.signal == "episodic" else 0
    recent = novelty.pixel_window * frame_bytes if novelty.signal == "pixel" else 0
    # the recurrent core's inputs, in each slot's two contexts (float32; the rest of a context is a few values)
    recurrent = 2 * 4 * RecurrentInput(learner.networks.recurrent_units, learner.networks.recurrent_window, 0).dim \
        if learner.networks.recurrent_units else 0
    return {"replay": int(replay_capacity(config) * (frame_bytes + 64 + recurrent)),
            "ring": config.ring.capacity * frame_bytes,
            "batch": learner.schedule.batch_size * (2 * stacked * (1 + 4) + 4 * passes * _first_conv(config)),
            "networks": 4 * (encoders + heads),
            "novelty": memory + recent,
            "record": config.record.chunk_frames * frame_bytes if config.record.dir else 0}


def _memory_keys(config: Config) -> dict[str, tuple[str, ...]]:
    """The settings that size each entry of :func:`memory_needed`."""
    novelty = config.novelty
    if novelty.signal == "pixel":
        novelty_keys: tuple[str, ...] = ("novelty.pixel_window",)
    elif novelty.embedding == "histogram":
        novelty_keys = ("novelty.episode_capacity", "novelty.histogram_bins")
    else:
        novelty_keys = ("novelty.episode_capacity", "novelty.embed_dim")
    replay: tuple[str, ...] = ("learner.schedule.replay_mb",)
    if config.learner.networks.recurrent_units:
        replay += ("learner.networks.recurrent_window",)
    return {"replay": replay, "ring": ("ring.capacity",),
            "batch": ("learner.schedule.batch_size",),
            "networks": ("learner.networks.hidden", "learner.networks.feature"), "novelty": novelty_keys,
            "record": ("record.chunk_frames",)}


def _setting(config: Config, key: str) -> str:
    value: Any = config
    for name in key.split("."):  # learner.schedule.replay_mb: a group's setting
        value = getattr(value, name)
    return f"{key} = {value:g}" if isinstance(value, float) else f"{key} = {value}"


def free_memory() -> int:
    """Bytes of memory free on this machine now (``psutil``)."""
    import psutil
    return int(psutil.virtual_memory().available)


def check_memory(config: Config, available: int | None = None) -> None:
    """Raise :class:`ConfigError` when what :func:`memory_needed` counts exceeds the memory free now.

    The modes call it as a run starts (explore, play, replay, evaluate): a run that cannot hold its
    buffers is stopped there, with the settings to lower, rather than by the kernel once it has taken
    all the memory. Loading a config does not: whether a config is valid does not depend on the machine.

    Args:
      available: free bytes; None asks the machine (:func:`free_memory`).
    """
    need = memory_needed(config)
    if available is None:
        available = free_memory()
    total = sum(need.values())
    if total <= available:
        return
    gib = 2**30
    names = _memory_keys(config)
    big = [k for k in sorted(need, key=need.__getitem__, reverse=True) if need[k] >= total / 100]
    parts = [f"{k} {need[k] / gib:.1f} GiB ({', '.join(_setting(config, s) for s in names[k])})" for k in big]
    keys = [s for k in big for s in names[k]]
    raise ConfigError(f"this run needs at least {total / gib:.1f} GiB of memory but {available / gib:.1f} GiB are "
                      f"free: {'; '.join(parts)}; lower {' or '.join(keys)}, or free memory")
