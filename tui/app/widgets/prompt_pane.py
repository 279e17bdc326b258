"""The prompt: presets, a text area, and the answer streamed as plain text."""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import Button, Static, TextArea

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
MAX_LINE_CHARS = 200
"""With ANSWER_LINES, the characters kept on average a line: an answer with no line breaks is bounded too."""

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
        yield AnswerView(ANSWER_LINES, id="answer")

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
        log = self.query_one(AnswerView)
        log.clear()
        self._held = ""
        log.write(heading + "\n")

    def append_answer(self, text: str, final: bool = False) -> None:
        """Model output is untrusted: the AnswerView shows it as plain text, never markup or escapes, and a secret the
        model repeats is redacted, even split over pieces: what could begin one waits for the next piece,
        or for `final` (the answer's end)."""
        text = redact(self._held + text)
        held = 0 if final else secret_begun(text)
        self._held = text[len(text) - held:] if held else ""
        self.query_one(AnswerView).write(strip_control(text[:len(text) - held]))


class AnswerView(VerticalScroll):
    """The answer as plain text, wrapped at the pane's edge and scrolled to its end while it streams (unless a
    person scrolled back), keeping the last `max_lines` lines. A `Log` cut each line at the edge instead.

    Text goes to a `Static` as a `Content` built from the string itself: plain text, never markup or escapes.
    """

    def __init__(self, max_lines: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_lines = max_lines
        self._lines: list[str] = [""]

    def compose(self) -> ComposeResult:
        yield Static(Content("\n".join(self.lines)), id="answer-text", markup=False)

    @property
    def lines(self) -> list[str]:
        """The kept lines, as written (a trailing line break opens no line)."""
        return self._lines[:-1] if self._lines[-1] == "" else list(self._lines)

    @property
    def line_count(self) -> int:
        return len(self.lines)

    def clear(self) -> None:
        self._lines = [""]
        self._show()

    def write(self, text: str) -> None:
        """Append `text` (already plain: the pane strips control characters) where the last write ended."""
        first, *rest = text.expandtabs(4).split("\n")
        self._lines[-1] += first
        self._lines.extend(rest)
        keep = self.max_lines + (self._lines[-1] == "")  # an open empty last line is not one of them
        if len(self._lines) > keep:
            del self._lines[:len(self._lines) - keep]
        over = sum(map(len, self._lines)) - self.max_lines * MAX_LINE_CHARS
        while over > 0:  # one endless line is bounded too
            cut = min(over, len(self._lines[0])) if len(self._lines) > 1 else over
            self._lines[0] = self._lines[0][cut:]
            if not self._lines[0] and len(self._lines) > 1:
                del self._lines[0]
            over -= cut
        self._show()

    def _show(self) -> None:
        try:
            shown = self.query_one("#answer-text", Static)
        except NoMatches:  # written before it is composed: shown when it is
            return
        following = self.is_vertical_scroll_end or self.max_scroll_y == 0
        shown.update(Content("\n".join(self.lines)))
        if following:
            self.scroll_end(animate=False)


def strip_control(text: str) -> str:
    """Drop terminal control characters (ESC and friends) but keep newlines and tabs."""
    return "".join(ch for ch in text if ch in "\n\t" or (ord(ch) >= 32 and ord(ch) != 127))
