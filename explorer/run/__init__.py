"""Composition: the one driver loop, the builder, and the modes (explore, play, record, replay, evaluate)."""
