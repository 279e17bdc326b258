"""The Textual app: one screen where a prompt splits into prefill and decode, live."""
