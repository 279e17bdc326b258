"""The main screen's state as plain values: the live session, and the lab and the tuning loop as state machines
that answer each fact or key with effects (`effects`), run by the screen in one place."""
