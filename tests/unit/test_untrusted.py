"""tui.core.untrusted: what a hostile server's text becomes before a person sees it (examples and properties)."""

from __future__ import annotations

import json

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.hostile import CONTROL_BYTES, ESCAPES, raw_controls
from tui.core.untrusted import (
    MAX_FIELD_CHARS,
    forget_secrets,
    one_line,
    printable,
    redact,
    redact_all,
    secret_begun,
    register_secret,
    register_url_credentials,
    without_credentials,
)

BOUNDED = settings(max_examples=300, deadline=None)


def test_escape_sequences_are_shown_not_acted_on():
    shown = printable(f"model{ESCAPES}id")
    assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown and "\r" not in shown
    assert shown.startswith("model\\x1b]0;pwned-title\\x07") and shown.endswith("id")


def test_newlines_and_tabs_stay_in_text_and_fold_in_a_field():
    assert printable("a\n\tb") == "a\n\tb"
    assert one_line("a\n\r\t  b\u2028c") == "a b c"


def test_bidi_overrides_cannot_reorder_a_line():
    assert printable("abc\u202edef") == "abc\\u202edef"


def test_a_field_is_capped_and_says_how_much_was_cut():
    shown = one_line("x" * 5000)
    assert shown.startswith("x" * MAX_FIELD_CHARS) and shown.endswith("(4,800 more characters)")


def test_a_value_of_any_type_is_shown_as_what_it_is():
    assert one_line(["a", 1]) == "['a', 1]" and one_line(7) == "7" and one_line(None) == "None"


def test_a_registered_key_is_redacted_wherever_it_appears():
    register_secret("sk-abc123")
    assert redact("invalid credentials: Bearer sk-abc123.") == "invalid credentials: Bearer ***."
    assert printable("k=sk-abc123") == "k=***" and one_line("sk-abc123") == "***"
    document = {"sk-abc123": ["id sk-abc123", 3, {"x": "sk-abc123sk-abc123"}]}
    assert json.dumps(redact_all(document)) == '{"***": ["id ***", 3, {"x": "******"}]}'


def test_a_secret_too_short_to_mean_anything_is_not_registered():
    register_secret("ab")
    assert redact("a cab drove by") == "a cab drove by"


def test_url_credentials_are_dropped_and_registered():
    url = "http://alice:s3cr%40t@gpu-host:8000/v1"
    register_url_credentials(url)
    assert without_credentials(url) == "http://gpu-host:8000/v1"
    assert redact("GET http://alice:s3cr%40t@gpu-host failed, pw s3cr@t") == "GET http://gpu-host failed, pw ***"
    assert redact("echo: Basic YWxpY2U6czNjckB0") == "echo: Basic ***", "base64 of alice:s3cr@t"
    assert without_credentials("http://[::1]:8000") == "http://[::1]:8000"
    assert without_credentials("not a url") == "not a url"


@BOUNDED
@given(st.text())
def test_no_text_keeps_a_raw_control_character(text):
    assert raw_controls(one_line(text)) == []
    assert [ch for ch in printable(text) if ord(ch) in CONTROL_BYTES] == []


@BOUNDED
@given(st.text(min_size=3), st.text(), st.text())
def test_no_text_shows_a_registered_secret(secret, before, after):
    assume("*" not in secret)  # the text around "***" could spell a secret made of stars
    forget_secrets()
    register_secret(secret)
    shown = redact(before + secret + after)
    assert secret not in shown
    assert secret not in printable(before + secret + after, limit=10**6)


@BOUNDED
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=300))
def test_printable_text_passes_unchanged(text):
    safe = "".join(ch for ch in text if ord(ch) not in CONTROL_BYTES and ch.isprintable() or ch in "\n\t")
    assert printable(safe) == safe


def test_the_start_of_a_secret_at_the_end_of_a_piece_is_held_back():
    register_secret("sk-abc123")
    assert secret_begun("your key is sk-a") == 4
    assert secret_begun("your key is s") == 1
    assert secret_begun("nothing here") == 0
    assert secret_begun("done: ***") == 0


@BOUNDED
@given(st.text(min_size=3, max_size=30), st.text(max_size=40), st.lists(st.integers(0, 80), max_size=4))
def test_a_secret_split_over_pieces_is_never_shown(secret, before, cuts):
    """The prompt pane's rule: redact what is held plus the new piece, show all but what could begin a secret."""
    assume("*" not in secret)
    forget_secrets()
    register_secret(secret)
    said = before + secret
    pieces = [said[a:b] for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(said)])]
    shown, held = "", ""
    for i, piece in enumerate(pieces):
        text = redact(held + piece)
        keep = 0 if i == len(pieces) - 1 else secret_begun(text)
        held = text[len(text) - keep:] if keep else ""
        shown += text[:len(text) - keep]
    assert secret not in shown
