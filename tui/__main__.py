"""`python -m tui` is the `phasetop` command."""

from tui.cli.main import main

raise SystemExit(main())
