"""Pure measurement core: no Textual, no httpx, no IO. Its rooms, in layers (import-linter keeps them):

state (the main screen's state machines) over view (what the panes draw) | experiments | serving (a server's
command line and the tuning arithmetic), over fleet | runs, over hardware (devices, models, the roofline), over
telemetry (what servers report), over measure (what a request measured, and how sure a figure is), over untrusted
(text a server sent).
"""
