"""Run directories: the merged config, a metrics file and pictures, one folder per run."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from explorer.config import Config, dump


def timestamped_path(parent: str | Path, name: str) -> Path:
    """``<parent>/<YYYYmmdd-HHMMSS>-<name>``, numbered when it exists already."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(parent) / f"{stamp}-{name}"
    n = 1
    while path.exists():
        n += 1
        path = Path(parent) / f"{stamp}-{name}-{n}"
    return path


class RunDir:
    """``<parent>/<timestamp>-<name>/`` with ``config.toml``, ``metrics.jsonl``, ``summary.json``
    and TensorBoard event files under ``tb/`` (``tensorboard --logdir runs``)."""

    def __init__(self, parent: str | Path, name: str, config: Config, path: str | Path | None = None):
        self.path = Path(path) if path is not None else timestamped_path(parent, name)
        self.path.mkdir(parents=True, exist_ok=True)
        dump(config, self.path / "config.toml")
        self._metrics = open(self.path / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self._writer: Any = None

    def log(self, record: dict[str, Any]) -> None:
        """Append one JSON line to ``metrics.jsonl`` and flush it."""
        self._metrics.write(json.dumps(record) + "\n")
        self._metrics.flush()

    def scalars(self, step: int, values: dict[str, float], prefix: str = "") -> None:
        """Write scalars to TensorBoard (``tb/``) at ``step``; names may hold a ``group/`` prefix."""
        import tensorflow as tf
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(str(self.path / "tb"))
        with self._writer.as_default(step=step):
            for name, value in values.items():
                tf.summary.scalar(f"{prefix}{name}", float(value))

    def write_summary(self, summary: dict[str, Any]) -> Path:
        path = self.path / "summary.json"
        path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        return path

    def close(self) -> None:
        self._metrics.close()
        if self._writer is not None:
            self._writer.close()
