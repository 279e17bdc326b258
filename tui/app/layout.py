"""The terminal sizes the screens change their layout at (their classes `-narrow`, `-short`; phasetop.tcss)."""

NARROW_WIDTH = 100
"""Below this many columns the main screen stacks its panes in one scrolled column."""
SHORT_HEIGHT = 30
"""Below this many rows the charts give up rows first: the timeline (stacked) so the prompt box stays in view beside
the load dial, an experiment's chart so its table and whole finding do."""
