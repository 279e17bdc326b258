"""The prompt: presets, a text area, and the answer streamed as plain text."""

from __future__ import annotations

from dataclasses import dataclass
from time import monotonic

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, TextArea

from tui.app.widgets.editing import EditArea
from tui.core.measure.sends import Send
from tui.core.untrusted import redact, secret_begun
from tui.sources.workloads.prompts import filler_text


@dataclass(frozen=True, slots=True)
class Preset:
    """One of the domain text's experiments as a prompt to send."""

    key: str
    label: str
    prompt_tokens: int
    concurrency: int = 1
    shared_prefix: bool = False
    max_tokens: int = 128
    button: bool = True
    """Also a button on the presets row (the row has room for four in the narrowest pane; the rest are keys)."""

    def send(self, first_id: int) -> Send:
        """This preset's requests, ids from `first_id`."""
        return Send(first_id, self.label, None, self.prompt_tokens, self.concurrency, self.max_tokens,
                    SHARED_PREFIX if self.shared_prefix else None)


WRITE_INTERVAL_S = 0.25
"""The streamed answer is written at most four times a second: each write grows the text area and lays out the screen."""
ANSWER_LINES = 1000
"""Lines of answers the pane keeps: one left streaming for hours must not hold all it ever showed."""
MAX_LINE_CHARS = 200
"""With ANSWER_LINES, the characters kept on average a line: an answer with no line breaks is bounded too."""

PRESETS = (
    Preset("short", "short 200", 200),
    Preset("long", "long 2000", 2000),
    Preset("system", "shared prefix", 2000, shared_prefix=True),
    Preset("concurrent", "8 at once", 200, concurrency=8, max_tokens=512),
    Preset("many", "32 at once", 200, concurrency=32, max_tokens=512, button=False),
)
"""8 (or 32) at once decode 512 tokens each (about 2.5 s on the simulated H100): long enough that the long prompt,
sent while they run, lands among them and its prefill stalls their decode on the wall clock."""
PLACEHOLDER = "type a prompt · Enter sends · Shift+Enter or Ctrl+J: a new line · Esc: back to the keys"
TYPED_MAX_TOKENS = 128
"""Tokens a typed prompt asks for."""
SHARED_PREFIX = filler_text("[shared system prompt]", 1800)
"""The shared-system-prompt preset sends this same prefix every time, so prefix caching can hit."""

PROBE_PRESETS = (("concurrent", 0.0), ("long", 1.0))
"""The fixed probe a restart can run (preset key, seconds after the first): 8 streams, and a second later the
long prompt lands among them: both phases and their interference, the same on every restart."""


def probe_sends() -> list[tuple[float, Send]]:
    """The probe's sends, each with its time after the first (ids are given as each is sent)."""
    return [(after_s, next(p for p in PRESETS if p.key == key).send(0)) for key, after_s in PROBE_PRESETS]


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
        # The buttons are for the mouse (their keys are 1–4 and s): Tab goes from the prompt box to the answer.
        with Horizontal(id="presets"):
            for preset in (p for p in PRESETS if p.button):
                yield _unfocusable(Button(preset.label, id=f"preset-{preset.key}", compact=True))
        # Send sits beside the text it sends: on the presets row it ran off a narrow pane.
        with Horizontal(id="compose"):
            yield PromptText(id="prompt-text", soft_wrap=True, placeholder=PLACEHOLDER)
            yield _unfocusable(Button("send typed", id="send-typed", variant="primary", compact=True))
        yield AnswerView(ANSWER_LINES, id="answer")

    def type_into(self, character: str) -> None:
        """Start (or go on with) the typed prompt: the box takes focus and `character` at its end.

        The focus moves now, not as `focus()` moves it (after the events already queued): the keys typed after
        this one, in the same burst, are the box's too, not the shortcuts they name."""
        box = self.query_one(PromptText)
        self.screen.set_focus(box)
        box.move_cursor(box.document.end)
        box.insert(character)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "send-typed":
            self.request_typed()
            return
        key = (event.button.id or "").removeprefix("preset-")
        self.request_preset(next(p for p in PRESETS if p.key == key))

    def request_typed(self) -> None:
        text = self.query_one(PromptText).text.strip()
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
        answer = self.query_one(AnswerView)
        answer.stream(strip_control(text[:len(text) - held]))
        if final:
            answer.flush()


class PromptText(EditArea):
    """The typed prompt: Enter sends it, Shift+Enter or Ctrl+J breaks the line, Esc leaves it (the keys are shortcuts
    again). These are in the footer while it is typed in: the screen's one-letter keys are the box's letters then."""

    BINDINGS = [
        Binding("enter", "send", "Send", id="prompt.send", tooltip="Send the typed prompt"),
        Binding("shift+enter,ctrl+j", "new_line", "New line", key_display="⇧⏎/^J", id="prompt.new_line",
                tooltip="A line break in the prompt"),
        Binding("escape", "leave", "Back to the keys", key_display="esc", id="prompt.leave",
                tooltip="Leave the prompt box: the one-letter keys are shortcuts again"),
    ]

    def action_send(self) -> None:
        self.query_ancestor(PromptPane).request_typed()

    def action_new_line(self) -> None:
        self.insert("\n")

    def action_leave(self) -> None:
        self.screen.set_focus(None)


def _unfocusable(button: Button) -> Button:
    button.can_focus = False
    return button


class AnswerView(TextArea):
    """The answer as plain text, wrapped at the pane's edge and scrolled to its end while it streams (unless a
    person scrolled back), keeping the last `max_lines` lines and about `MAX_LINE_CHARS` a line.

    A read-only `TextArea`: it shows text as it is (never markup or escapes), wraps it, and grows inside its
    own scroll region, so a streamed piece repaints the pane alone. A `Static` of auto height made the whole
    screen lay out again on every piece (20–240 ms at 200×50 with 8 streams, holding the next key back)."""

    write_interval_s = WRITE_INTERVAL_S
    """Least time between two writes of streamed text (0: each at once); what comes between waits for the next."""

    def __init__(self, max_lines: int, **kwargs) -> None:
        super().__init__(read_only=True, soft_wrap=True, show_cursor=False, highlight_cursor_line=False, **kwargs)
        self.cursor_blink = False  # no cursor shown: no blink timer repainting the pane twice a second
        self.max_lines = max_lines
        self._chars = 0
        """Characters kept, line breaks not counted."""
        self._pending: list[str] = []
        self._written_at = -float("inf")
        self._flush_timer = None

    @property
    def lines(self) -> list[str]:
        """The kept lines, as written (a trailing line break opens no line)."""
        lines = self.text.split("\n")
        return lines[:-1] if lines[-1] == "" else lines

    @property
    def line_count(self) -> int:
        return len(self.lines)

    def clear(self) -> None:
        self._pending.clear()
        self.load_text("")
        self._chars = 0

    def stream(self, text: str) -> None:
        """Append streamed text at most every `write_interval_s` (each write grows the text area, and a growing
        text area lays the whole screen out again): what comes between waits, and is written with the next."""
        self._pending.append(text)
        wait_s = self._written_at + self.write_interval_s - monotonic()
        if wait_s <= 0:
            self.flush()
        elif self._flush_timer is None:
            self._flush_timer = self.set_timer(wait_s, self.flush)

    def flush(self) -> None:
        """Write what streamed text waits, now."""
        self._flush_timer = None
        self._written_at = monotonic()
        if self._pending:
            text, self._pending = "".join(self._pending), []
            self.write(text)

    def write(self, text: str) -> None:
        """Append `text` (already plain: the pane strips control characters) where the last write ended."""
        text = text.expandtabs(4)
        following = self.is_vertical_scroll_end or self.max_scroll_y == 0
        self.insert(text, self.document.end)
        self._chars += len(text) - text.count("\n")
        self._trim()
        if following:
            self.scroll_end(animate=False)

    def _trim(self) -> None:
        document = self.document
        open_line = document.get_line(document.line_count - 1) == ""  # a trailing break: not a kept line
        excess = document.line_count - open_line - self.max_lines
        if excess > 0:
            self._drop_lines(excess)
        over = self._chars - self.max_lines * MAX_LINE_CHARS
        while over > 0:  # one endless line is bounded too
            first = document.get_line(0)
            if document.line_count > 1 and len(first) <= over:
                self._drop_lines(1)
                over -= len(first)
            else:
                self.delete((0, 0), (0, over))
                self._chars -= over
                over = 0

    def _drop_lines(self, count: int) -> None:
        self._chars -= sum(len(self.document.get_line(i)) for i in range(count))
        self.delete((0, 0), (count, 0))


def strip_control(text: str) -> str:
    """Drop terminal control characters (ESC and friends) but keep newlines and tabs."""
    return "".join(ch for ch in text if ch in "\n\t" or (ord(ch) >= 32 and ord(ch) != 127))
