"""One adapter per serving engine: what phasetop knows of each (its /metrics names, its words for the knobs the
diagnosis turns, how its command is recognised and where it listens), so adding or fixing an engine is one file."""
