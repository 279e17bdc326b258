"""`python -m tui` is the `phasetop` command."""

from tui.entry import main

raise SystemExit(main())
