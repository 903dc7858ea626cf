"""A run's coverage figure at points of its run: does coverage rise with experience?

Reads an explore run's ``metrics.jsonl`` (its episode lines) and prints, at each step asked for, the
figure ``explorer explore`` prints at its end, cells per episode budget over the last 20 episodes
(:func:`explorer.run.coverage.cells_per_budget`, deaths as whole episodes), over the episodes that had
ended by that step; and the mean cells of the run's first and last ten episodes.

Usage::

    python tools/learning_curve.py runs/<run> --at 10000 30000 100000
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def episodes(run: Path) -> list[dict]:
    """The run's finished episodes in order: ``step`` (its last), ``cells``, ``outcome``, ``length``."""
    path = run / "metrics.jsonl"
    if not path.is_file():
        raise SystemExit(f"learning_curve: {path} does not exist: give an explore run's directory")
    rows, start = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "episode" in record and "cells" in record:
            rows.append({**record, "length": record["step"] - start})
            start = record["step"]
    return rows


def curve(run: Path, points: list[int]) -> dict:
    from explorer.config import load
    from explorer.run.coverage import cells_per_budget

    done = episodes(run)
    budget = load(run / "config.toml", run_file=True).game.episode_steps
    out = {"run": str(run), "budget": budget, "episodes": len(done), "points": {}}
    for point in points:
        ended = [e for e in done if e["step"] <= point]
        out["points"][point] = {"episodes": len(ended), "figure": cells_per_budget(
            [e["cells"] for e in ended], [e["length"] for e in ended], budget,
            outcomes=[e.get("outcome") for e in ended]) if ended else float("nan")}
    ten = [e["cells"] for e in done]
    out["first_ten"] = sum(ten[:10]) / max(len(ten[:10]), 1)
    out["last_ten"] = sum(ten[-10:]) / max(len(ten[-10:]), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent.parent
    if str(here) not in sys.path:
        sys.path.insert(0, str(here))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="explore run directories")
    p.add_argument("--at", nargs="+", type=int, default=[10000, 30000, 100000], help="agent steps (default 10k 30k 100k)")
    args = p.parse_args(argv)
    for run in args.runs:
        c = curve(run, args.at)
        figures = ", ".join(f"{k // 1000}k {v['figure']:.1f} ({v['episodes']} episodes)" for k, v in c["points"].items())
        print(f"{run}: {figures}; first ten episodes {c['first_ten']:.1f} cells, last ten {c['last_ten']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
