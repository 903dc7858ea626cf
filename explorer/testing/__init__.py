"""Fakes of the two ends (a screen serving known frames, a pad recording every call) and a fixed CNN policy, for
tests, benchmarks and docs.

Production code never imports this package.
"""
