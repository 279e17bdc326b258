"""Saved runs: the run record and two compared, its file's schema, UI sessions as runs, a comparison in words."""
