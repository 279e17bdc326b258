"""Running phasetop's CLI in the test's own process, as `main` would from a shell."""

from __future__ import annotations

from tui.cli.main import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of `phasetop ARGV…` (argparse's own errors exit: their status is kept)."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_clear_line(code: int, err: str, *words: str) -> None:
    assert code != 0
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for word in words:
        assert word.lower() in lines[0].lower(), lines[0]
