"""How well a place test from pixels tells places apart, against the engine's positions (ViZDoom maps).

The map of ``learner.actions.route_after`` (``explorer/agent/routes.py``) calls two frames one place when
their pictures are close. This measures, on ``sticky_prior``'s play, each decision's frame against every
earlier decision's frame of its episode: how often the nearest one passes the test (the frame is *matched*
to a place seen before), how often that place is the previous decision's (the agent stood still), and how
far from the matched frame's position the player really stands (positions are read for this measurement
only). A good test matches often and near: the references are the earlier decision nearest in position (the
best any test could match) and one at random.

Tests: ``picture`` (the map's own: grey block means of ``SIDE`` x ``SIDE``, normalised, by cosine), ``blocks4``
(the same with 4 x 4 blocks), and ``colours`` (a histogram of 64 colours, square-rooted and normalised: blind
to the way the player faces, by cosine).

    python tools/place_recognition.py --maps my_way_home E1M1 --steps 4000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import traversability  # noqa: E402  (the collector of play with positions)

from explorer.agent.routes import picture  # noqa: E402

THRESHOLDS = {"picture": (0.8, 0.9, 0.95), "blocks4": (0.8, 0.9, 0.95), "colours": (0.9, 0.97, 0.99)}


def _normed(x: np.ndarray) -> np.ndarray:
    x = x - x.mean(axis=1, keepdims=True)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-6)


def tests(frames: np.ndarray) -> dict[str, np.ndarray]:
    """Each test's vectors of ``frames`` (``uint8[N, H, W, 3]``), rows of unit length: cosine is their product."""
    quantised = (frames // 64).astype(np.int64)
    colour = quantised[..., 0] * 16 + quantised[..., 1] * 4 + quantised[..., 2]
    counts = np.stack([np.bincount(c.ravel(), minlength=64) for c in colour]).astype(np.float32)
    return {"picture": np.stack([picture(f) for f in frames]),
            "blocks4": np.stack([picture(f, 4) for f in frames]),
            "colours": _normed(np.sqrt(counts))}


def measure(path: Path, hold: int = 8) -> list[dict]:
    """Rows of (test, threshold, matched share, previous-decision share, median and 75th percentile distance)."""
    data = np.load(path)
    at = np.arange(0, len(data["frames"]), hold)
    frames, positions, episodes = data["frames"][at], data["positions"][at], data["episodes"][at]
    rows = []
    for name, vectors in tests(frames).items():
        best, dist, previous = [], [], []
        for j in range(len(at)):
            earlier = np.flatnonzero(episodes[:j] == episodes[j])
            if not len(earlier):
                continue
            sims = vectors[earlier] @ vectors[j]
            k = int(np.argmax(sims))
            best.append(sims[k])
            dist.append(float(np.hypot(*(positions[j] - positions[earlier[k]]))))
            previous.append(earlier[k] == j - 1)
        best_, dist_, prev_ = np.array(best), np.array(dist), np.array(previous)
        if name == "picture":  # the references: the earlier decision nearest in position, and one at random
            rng = np.random.default_rng(0)
            nearest, anyone = [], []
            for j in range(len(at)):
                earlier = np.flatnonzero(episodes[:j] == episodes[j])
                if len(earlier):
                    d = np.hypot(*(positions[earlier] - positions[j]).T)
                    nearest.append(float(d.min()))
                    anyone.append(float(d[rng.integers(len(d))]))
            for label, d in (("nearest in position", np.array(nearest)), ("at random", np.array(anyone))):
                rows.append({"test": f"earlier decision {label}", "threshold": float("nan"), "matched": 1.0,
                             "previous": float("nan"), "median": float(np.median(d)),
                             "p75": float(np.percentile(d, 75))})
        for t in THRESHOLDS[name]:
            sel = best_ >= t
            rows.append({"test": name, "threshold": t, "matched": float(sel.mean()),
                         "previous": float(prev_[sel].mean()) if sel.any() else float("nan"),
                         "median": float(np.median(dist_[sel])) if sel.any() else float("nan"),
                         "p75": float(np.percentile(dist_[sel], 75)) if sel.any() else float("nan")})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--maps", nargs="+", default=["my_way_home", "E1M1"], choices=list(traversability.MAPS))
    ap.add_argument("--steps", type=int, default=4000, help="steps of sticky_prior's play per map")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("runs/place_recognition"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print("| map | test | cosine at least | decisions matched | of them the previous decision | distance, median (p75) |")
    print("|---|---|---|---|---|---|")
    for m in args.maps:
        path = args.out / f"{m}_s{args.seed}_{args.steps}.npz"
        if not path.exists():
            traversability.collect(m, args.seed, args.steps, path)
        for r in measure(path):
            t = "" if np.isnan(r["threshold"]) else f"{r['threshold']:g}"
            prev = "" if np.isnan(r["previous"]) else f"{r['previous']:.0%}"
            print(f"| {m} | {r['test']} | {t} | {r['matched']:.0%} | {prev} | {r['median']:.0f} ({r['p75']:.0f}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
