"""Regenerate ``config.toml`` from the defaults and descriptions in ``explorer/config/schema.py``."""

from pathlib import Path

from explorer.config import render_toml

if __name__ == "__main__":
    path = Path(__file__).resolve().parent.parent / "config.toml"
    path.write_text(render_toml(), encoding="utf-8")
    print(f"wrote {path}")
