"""A server phasetop runs: its command line, what its --help says, its flags, how a child exited, and the
tuning loop's arithmetic (objectives, the leader and how sure its lead is)."""
