"""The `phasetop` command: the UI with no subcommand, else one headless subcommand.

This is the one module that sees both `tui.cli` and `tui.app`, so the CLI itself never loads Textual.
"""

from __future__ import annotations

import gc
from pathlib import Path

from tui.cli.main import parse_args, run_command
from tui.cli.output import CliError, note


def main(argv: list[str] | None = None) -> int:
    # No collection while start-up builds what lives as long as the process (two full ones cost the UI 30–70 ms
    # each before its first frame); the UI turns it back on once it is up (`PhasetopApp`), a command at once.
    gc.disable()
    args = parse_args(argv)
    if args.command is not None:
        gc.enable()
        return run_command(args)
    from tui.cli.common import ui_settings
    from tui.config import default_config_file

    fleet = {"prometheus.url": args.prometheus or None, "prometheus.role_label": args.role_label}
    try:
        settings = ui_settings(args, **fleet)
    except CliError as error:  # a bad setting is one line before the screen opens, as in the CLI
        note(f"phasetop: {error}")
        return error.exit_code
    from tui.app.launch import draw_apart, run_fleet, run_ui  # Textual loads only for the UI

    draw_apart()

    theme_file = Path(args.config) if args.config else default_config_file()
    if args.prometheus is not None:
        return run_fleet(settings, save_runs=not args.no_save, theme_file=theme_file)
    return run_ui(settings, url_given=args.url is not None, save_runs=not args.no_save, serve=args.serve,
                  start_timeout_s=args.start_timeout_s, renice=args.renice, theme_file=theme_file)
