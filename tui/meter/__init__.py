"""The meter processes: the UI's token streams read and stamped apart from the process that renders them.

`MeterPool` (one meter process, or several sharing the streams) gives each server a `RemoteMeter`, which measures
as `tui.sources.meter.LocalMeter` does, the same reading loop run in `service` (`python -m tui.meter`), its
events brought back over a pipe (`protocol`) by `link`.
"""
