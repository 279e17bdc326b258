"""The answer's completion id, read from its first chunk that has one: how its trace span names the request."""

from tui.sources.chunks import Tally, read_openai


def test_the_first_chunks_id_is_kept():
    tally = Tally()
    read_openai({"id": "cmpl-ab12", "choices": [{"text": "a"}]}, tally)
    read_openai({"id": "cmpl-other", "choices": [{"text": "b"}]}, tally)
    assert tally.completion_id == "cmpl-ab12"


def test_an_id_that_is_no_string_is_not_kept_and_a_later_one_is():
    tally = Tally()
    read_openai({"id": 5, "choices": [{"text": "a"}]}, tally)
    assert tally.completion_id is None
    read_openai({"id": "chatcmpl-9", "choices": [{"delta": {"content": "b"}}]}, tally)
    assert tally.completion_id == "chatcmpl-9"


def test_a_servers_id_cannot_act_on_a_terminal():
    tally = Tally()
    read_openai({"id": "cmpl-\x1b]52;c;eA==\x07" + "x" * 1000, "choices": []}, tally)
    assert "\x1b" not in tally.completion_id and len(tally.completion_id) < 300
