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


def test_doctor_report_to_a_folder_or_a_path_it_cannot_write_is_one_line(tmp_path, capsys, monkeypatch):
    import errno

    from explorer.run import doctor

    assert cli.main(["doctor", "--report", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (f"explorer: --report {tmp_path} is a folder; give the file to write the report to, "
                                       f"e.g. {tmp_path / 'doctor.md'}\n")  # said before the checks run
    (tmp_path / "notes").write_text("mine")
    assert cli.main(["doctor", "--report", str(tmp_path / "notes" / "doctor.md")]) == 1
    assert capsys.readouterr().err == (f"explorer: --report {tmp_path}/notes/doctor.md: {tmp_path}/notes is a file, "
                                       "not a folder; give another file (--report FILE)\n")

    def full_disk(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(doctor, "atomic_write", full_disk)
    assert cli.main(["doctor", "--report", str(tmp_path / "doctor.md")]) == 1
    out, err = capsys.readouterr()
    assert "built-in game" in out and "Traceback" not in err  # the checks ran and were shown
    assert err.splitlines()[-1] == (f"explorer: cannot write the report {tmp_path}/doctor.md: No space left on device; "
                                    "free space there, or give another file (--report FILE)")
    assert (tmp_path / "notes").read_text() == "mine" and not (tmp_path / "doctor.md").exists()
