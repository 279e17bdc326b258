"""The parser is built without the stacks the commands run on: `phasetop --help` and `--version` load no server (no
uvicorn, Starlette or simulator module, no OTLP receiver), and a chosen command loads its own, not the others'."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tui.cli.commands import COMMANDS, module_of
from tui.cli.main import build_parser, parse_args

SERVER_STACK = ("uvicorn", "starlette", "tui.sim", "tui.sources.otlp_receiver", "textual", "aiohttp")


def loaded_after(*argv: str) -> set[str]:
    """The modules a fresh interpreter holds after `phasetop ARGV` (its exit caught), by their top names and ours."""
    script = (
        "import sys\nfrom tui.entry import main\n"
        f"try:\n    main({list(argv)!r})\nexcept SystemExit:\n    pass\n"
        "print('\\n'.join(sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    return set(done.stdout.split("\n"))


@pytest.mark.parametrize("argv", [("--help",), ("--version",)])
def test_help_and_version_load_no_server_stack(argv):
    modules = loaded_after(*argv)
    assert "tui.cli.main" in modules
    assert not [m for m in modules if m.startswith(SERVER_STACK)], sorted(m for m in modules if m.startswith(SERVER_STACK))
    assert not [m for m in modules if m.startswith("tui.cli.") and m not in ("tui.cli.main", "tui.cli.commands",
                                                                           "tui.cli.options", "tui.cli.output")]


def test_a_commands_help_loads_its_module_and_no_other_commands():
    modules = loaded_after("probe", "--help")
    assert "tui.cli.probe" in modules
    others = {module_of(name) for name in COMMANDS if name != "probe"}
    assert not modules & others, sorted(modules & others)
    assert "uvicorn" not in modules


def test_every_command_is_listed_with_its_own_help_and_registers_under_its_name():
    listed = build_parser().format_help()
    for name, summary in COMMANDS.items():
        assert name in listed and summary.split()[0] in listed
        parser = build_parser(name).commands()[name]
        assert parser.prog == f"phasetop {name}" and any(a.option_strings == ["-h", "--help"] for a in parser._actions)


def test_words_the_first_reading_cannot_place_still_run_the_command_typed():
    """`--mod` (argparse's abbreviation of --model), which flag hoisting leaves in place, before the command: its value
    `sim` looks like a command, the command typed is probe, and probe's own parser reads its flags (not a bare entry
    with no handler)."""
    args = parse_args(["--mod", "sim", "probe", "--repeat", "2"])
    assert args.command == "probe" and args.repeat == 2 and callable(args.handler)
