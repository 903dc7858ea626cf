"""The command line refuses numbers that would make a run meaningless, before anything starts."""

from __future__ import annotations

import pytest

from explorer import cli


@pytest.mark.parametrize(("args", "message"), [
    (["record", "--hz", "-5"], "argument --hz: must be more than 0, got -5"),  # was a ValueError traceback
    (["record", "--chunk-frames", "0"], "argument --chunk-frames: must be more than 0, got 0"),
    (["record", "--seconds", "0"], "argument --seconds: must be more than 0, got 0"),  # was a 1-frame session
    (["replay", "s", "--steps", "-5"], "argument --steps: must be more than 0, got -5"),  # was 0 transitions, exit 0
    (["replay", "s", "--epochs", "0"], "argument --epochs: must be more than 0, got 0"),
    (["replay", "s", "--checkpoint-every", "-1"], "argument --checkpoint-every: must be 0 or more, got -1"),
    (["play", "--seconds", "inf"], "argument --seconds: must be more than 0, got inf"),
    (["explore", "--steps", "1.5"], "argument --steps: '1.5' is not an integer"),
])
def test_numbers_that_make_no_run_are_refused(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(args)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"explorer {args[0]}: error: {message}"


def test_zero_checkpoint_interval_means_only_at_the_end():
    args = cli.build_parser().parse_args(["replay", "s", "--checkpoint-every", "0", "--steps", "7"])
    assert args.checkpoint_every == 0 and args.steps == 7
