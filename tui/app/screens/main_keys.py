"""The main screen's keys: the footer shows them in this order and cuts off what does not fit."""

from __future__ import annotations

from textual.binding import Binding

LAB_BINDINGS = [
    Binding("r", "runs", "Runs", tooltip="Saved runs: pick two to compare them", id="runs.open"),
    Binding("T", "traffic", "Traffic", show=False, id="traffic.open",
            tooltip="Every request the server served, from its OpenTelemetry spans: queue, prefill, decode"),
    Binding("l", "toggle_load", "Load", id="load.toggle",
            tooltip="Start or stop a steady load (rate and concurrency on the dial); watch KV usage, queue and bandwidth"),
    Binding("b", "compare_before", "Compare with before", show=False, id="session.compare",
            tooltip="This server session against the one before the restart: config diff, TTFT, ITL, decode, bandwidth"),
    Binding("plus", "turn_rate(2.0)", "Load rate up", key_display="+", show=False,
            tooltip="Double the load's request rate", id="load.rate_up"),
    Binding("minus", "turn_rate(0.5)", "Load rate down", key_display="-", show=False,
            tooltip="Halve the load's request rate", id="load.rate_down"),
    Binding("right_square_bracket", "turn_concurrency(2.0)", "Load concurrency up", key_display="]", show=False,
            tooltip="Double the most requests the load keeps in flight", id="load.concurrency_up"),
    Binding("left_square_bracket", "turn_concurrency(0.5)", "Load concurrency down", key_display="[", show=False,
            tooltip="Halve the most requests the load keeps in flight", id="load.concurrency_down"),
    Binding("p", "sweep('prompt-tokens')", "Sweep: prompt length", show=False, id="sweep.prompt_length",
            tooltip="TTFT and decode rate against prompt length, 200 to 2,000 tokens"),
    Binding("x", "sweep('prefix')", "Sweep: prefix cache", show=False, id="sweep.prefix",
            tooltip="The same long system prompt sent twice, against a unique one"),
    Binding("n", "sweep('concurrency')", "Sweep: concurrency", show=False, id="sweep.concurrency",
            tooltip="Aggregate tok/s and p99 ITL against 1, 2, 4 … 32 streams at once"),
    Binding("i", "sweep('interference')", "Sweep: long-prompt interference", show=False, id="sweep.interference",
            tooltip="A 4,000-token prompt lands among 8 running streams: their ITL spikes"),
    Binding("g", "sweep('context')", "Sweep: context growth", show=False, id="sweep.context",
            tooltip="ITL against token position in one long generation (to 8,000 tokens)"),
    Binding("d", "sweep('disaggregation')", "Sweep: disaggregation", show=False, id="sweep.disaggregation",
            tooltip="Is 1P1D worth it? A long prompt among 8 streams on phasetop's simulator: one device (chunked "
            "prefill off, then chunks of 512), 1P1D over InfiniBand NDR, 1P1D split on one device"),
    Binding("e", "sweep('speculation')", "Sweep: speculative decoding", show=False, id="sweep.speculation",
            tooltip="Is speculation worth it? The same streams with n-gram speculation off and on, at batch 1, 8, 32 and 128, "
            "on phasetop's simulator: the gain at batch 1 and where it turns into a loss"),
]
"""The lab's keys, appended to the main screen's own (so the footer shows those first). Only l and r
take footer room; the rest are in the help screen and the palette, and the dial shows its own keys."""
PRESET_KEYS = Binding.Group("Presets")
"""1–4 take one footer entry ("1 2 3 4 Presets"); the help screen and palette still list each."""
SERVER_BINDINGS = [
    Binding("R", "start_server_again", "Start the server again", show=False, id="server.start_again",
            tooltip="Start the server phasetop runs (its simulator, or the --serve command's last good flags) again, "
            "on the same port, once it has exited"),
    Binding("f", "edit_flags", "Flags", show=False, id="server.flags",
            tooltip="Edit the served command's flags; Enter restarts it, sends the last prompts again, compares"),
    Binding("o", "server_log", "Server log", show=False, id="server.log",
            tooltip="The served command's output (stdout and stderr), filtered as you type"),
]
"""Listed in the help screen while phasetop runs a server (its simulator, or --serve), R usable once it exited (the
toast and the GPU/host pane then name the key); off the footer, which has no room to spare."""

# The footer shows these in this order and cuts off what does not fit: the fixed keys (s, ?, and the
# app's q after the lab's two) fit an 80-column terminal because the presets share one footer entry.
MAIN_BINDINGS = [
    Binding("s", "send", "Send", tooltip="Send the typed prompt (or the short preset)", id="send"),
    Binding("question_mark", "help", "Help", key_display="?", tooltip="Every key, with what it does", id="help"),
    Binding("1", "preset('short')", "Short 200", tooltip="Send a 200-token prompt", id="preset.short", group=PRESET_KEYS),
    Binding("2", "preset('long')", "Long 2000", tooltip="Send a 2,000-token prompt", id="preset.long", group=PRESET_KEYS),
    Binding("3", "preset('system')", "Shared prefix", tooltip="Send a prompt behind the same long system prompt",
            id="preset.system", group=PRESET_KEYS),
    Binding("4", "preset('concurrent')", "8 at once", tooltip="Send 8 short prompts at once", id="preset.concurrent",
            group=PRESET_KEYS),
    Binding("5", "preset('many')", "32 at once", tooltip="Send 32 short prompts at once: a lane each",
            id="preset.many", group=PRESET_KEYS),
    Binding("c", "clear", "Clear", tooltip="Clear the timeline", id="clear"),
    # On a narrow terminal the panes are stacked and scrolled: these bring one into view (the prompt pane's title
    # names them there).
    Binding("m", "show_pane('metrics-pane')", "Server metrics", show=False, id="pane.metrics",
            tooltip="Bring the Server metrics pane into view"),
    Binding("h", "show_pane('gpu-pane')", "GPU / host", show=False, id="pane.gpu",
            tooltip="Bring the GPU / host pane into view"),
    Binding("t", "show_pane('timeline-pane')", "Timeline", show=False, id="pane.timeline",
            tooltip="Bring the token timeline into view"),
    Binding("w", "roofline", "Roofline", show=False, id="roofline.open",
            tooltip="Where prefill and decode sit under the device's compute and bandwidth roofs, live"),
    Binding("v", "timeline_view", "View", tooltip="Timeline: each lane from its own send (aligned), or one wall clock",
            id="timeline.view"),
    # Not priority bindings: a focused prompt box (or the answer) keeps its own arrows.
    Binding("up", "select_lane(1)", "Older lane", key_display="↑", show=False, id="timeline.older",
            tooltip="The figures and diagnosis under the timeline: the lane above (an older request)"),
    Binding("down", "select_lane(-1)", "Newer lane", key_display="↓", show=False, id="timeline.newer",
            tooltip="The figures and diagnosis under the timeline: the lane below (a newer request)"),
    *LAB_BINDINGS,
    *SERVER_BINDINGS,
]
