"""Run directories: the merged config, a metrics file and pictures, one folder per run."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from explorer.config import Config, dump


class RunDir:
    """``<parent>/<timestamp>-<name>/`` with ``config.toml``, ``metrics.jsonl`` and ``summary.json``."""

    def __init__(self, parent: str | Path, name: str, config: Config, path: str | Path | None = None):
        if path is None:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            path = Path(parent) / f"{stamp}-{name}"
            n = 1
            while path.exists():
                n += 1
                path = Path(parent) / f"{stamp}-{name}-{n}"
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        dump(config, self.path / "config.toml")
        self._metrics = open(self.path / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115 (closed in close())

    def log(self, record: dict[str, Any]) -> None:
        """Append one JSON line to ``metrics.jsonl`` and flush it."""
        self._metrics.write(json.dumps(record) + "\n")
        self._metrics.flush()

    def write_summary(self, summary: dict[str, Any]) -> Path:
        path = self.path / "summary.json"
        path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        return path

    def close(self) -> None:
        self._metrics.close()
