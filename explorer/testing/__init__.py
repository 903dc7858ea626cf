"""Fakes of the two ends (a screen serving known frames, a pad recording every call), for tests and docs.

Production code never imports this package.
"""
