"""The prompt: presets, a text area, and the answer streamed as plain text."""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Log, TextArea

from tui.core.untrusted import redact, secret_begun


@dataclass(frozen=True, slots=True)
class Preset:
    """One of the domain text's experiments as a prompt to send."""

    key: str
    label: str
    prompt_tokens: int
    concurrency: int = 1
    shared_prefix: bool = False


ANSWER_LINES = 1000
"""Lines of answers the pane keeps: one left streaming for hours must not hold all it ever showed."""

PRESETS = (
    Preset("short", "short 200", 200),
    Preset("long", "long 2000", 2000),
    Preset("system", "shared prefix", 2000, shared_prefix=True),
    Preset("concurrent", "8 at once", 200, concurrency=8),
)


class PromptPane(Vertical):
    """Where a person asks for a request; it posts intents and never does IO itself."""

    _held = ""
    """The answer's last characters, held back while they could begin a secret (`append_answer`)."""

    class SendRequested(Message):
        """Send a request: the typed text, or a generated prompt of a preset's size."""

        def __init__(self, text: str | None, preset: Preset | None) -> None:
            super().__init__()
            self.text = text
            """The typed prompt, or None for a generated one."""
            self.preset = preset
            """The preset to generate from, or None for the typed text."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="presets"):
            for preset in PRESETS:
                yield Button(preset.label, id=f"preset-{preset.key}", compact=True)
        # Send sits beside the text it sends: on the presets row it ran off a narrow pane.
        with Horizontal(id="compose"):
            yield TextArea(id="prompt-text", soft_wrap=True, placeholder="type a prompt, or pick a preset")
            yield Button("send typed", id="send-typed", variant="primary", compact=True)
        yield Log(id="answer", highlight=False, auto_scroll=True, max_lines=ANSWER_LINES)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "send-typed":
            self.request_typed()
            return
        key = (event.button.id or "").removeprefix("preset-")
        self.request_preset(next(p for p in PRESETS if p.key == key))

    def request_typed(self) -> None:
        text = self.query_one(TextArea).text.strip()
        if text:
            self.post_message(self.SendRequested(text, None))
        else:
            self.request_preset(PRESETS[0])

    def request_preset(self, preset: Preset) -> None:
        self.post_message(self.SendRequested(None, preset))

    def start_answer(self, heading: str) -> None:
        log = self.query_one(Log)
        log.clear()
        self._held = ""
        log.write(heading + "\n")

    def append_answer(self, text: str, final: bool = False) -> None:
        """Model output is untrusted: a Log writes it as plain text, never markup or escapes, and a secret the
        model repeats is redacted, even split over pieces: what could begin one waits for the next piece,
        or for `final` (the answer's end)."""
        text = redact(self._held + text)
        held = 0 if final else secret_begun(text)
        self._held = text[len(text) - held:] if held else ""
        self.query_one(Log).write(strip_control(text[:len(text) - held]))


def strip_control(text: str) -> str:
    """Drop terminal control characters (ESC and friends) but keep newlines and tabs."""
    return "".join(ch for ch in text if ch in "\n\t" or (ord(ch) >= 32 and ord(ch) != 127))
