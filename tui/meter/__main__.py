"""`python -m tui.meter`: a meter process (its parent starts it; see `tui.meter.service`)."""

from tui.meter.service import main

main()
