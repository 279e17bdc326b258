"""The pseudo-tokenizer is deterministic and round-trips; generated text re-tokenizes to the tokens sent."""

from tui.sim import tokenizer


def test_words_and_punctuation_are_tokens_and_join_back():
    text = "Hello, world!  How are   you?\n"
    pieces = tokenizer.tokenize(text)
    assert "".join(pieces) == text
    assert [p.strip() for p in pieces[:4]] == ["Hello", ",", "world", "!"]
    assert tokenizer.count(text) == len(pieces) == 9


def test_ids_are_stable_and_prefix_preserving():
    assert tokenizer.encode("the same words") == tokenizer.encode("the same words")
    assert tokenizer.encode("a b c d e")[:3] == tokenizer.encode("a b c")


def test_generated_text_counts_one_token_per_piece():
    seed = tokenizer.request_seed([1, 2, 3])
    text = "".join(tokenizer.filler_token(seed, i) for i in range(200))
    assert tokenizer.count(text) == 200


def test_natural_length_is_bounded_and_deterministic():
    lengths = {tokenizer.natural_length(tokenizer.request_seed([i])) for i in range(50)}
    assert min(lengths) >= tokenizer.NATURAL_MIN_TOKENS
    assert max(lengths) < tokenizer.NATURAL_MIN_TOKENS + tokenizer.NATURAL_SPAN_TOKENS
    assert len(lengths) > 5


def test_generated_text_puts_no_space_before_punctuation_and_still_round_trips():
    seed = tokenizer.request_seed([4, 5, 6])
    pieces = [tokenizer.filler_token(seed, i) for i in range(300)]
    text = "".join(pieces)
    assert " ," not in text and " ." not in text
    assert ", " in text and ". " in text
    assert tokenizer.tokenize(text) == pieces
