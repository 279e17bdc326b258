"""Real vLLM 0.32 speculating (ngram, 3 drafts a step) and streaming at an interval of 4: chunks of several tokens,
counted by vLLM's own per-chunk usage; phasetop's per-token ITL stays the server's step while its chunk gaps are
several steps; the spec_decode counters read as acceptance, tokens a step and each position's rate.

A random-weight model decoding greedily falls into a loop, so an n-gram proposer's drafts are accepted
(docs/vllm-streaming.md); phasetop sends no temperature, so the server is told to default to greedy. Sampled at
temperature 1 the random model's answers never repeat the prompt, and the proposer drafts nothing."""

from __future__ import annotations

import json
import statistics

import pytest

from tests.real_vllm.conftest import CLIENT_TIMEOUT_S, MEASURING_FLAGS, phasetop_json, start_vllm
from tui.cli.main import main

pytestmark = pytest.mark.real_vllm

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
TOKENS = 64
PROMPT = "one two three four " * 8


@pytest.fixture(scope="module")
def speculating():
    flags = ("--stream-interval", "4", "--speculative-config", json.dumps(NGRAM),
             "--override-generation-config", json.dumps({"temperature": 0}))
    with start_vllm((*MEASURING_FLAGS, *flags)) as server:
        yield server


def test_chunks_of_several_tokens_are_counted_and_each_token_timed(capsys, speculating):
    code, document, err = phasetop_json(capsys, "probe", "--url", speculating.url, "--prompt", PROMPT, "--max-tokens",
                                        str(TOKENS), "--repeat", "4", "--timeout", CLIENT_TIMEOUT_S, "--no-save")
    assert code == 0, err
    done = [r for r in document["requests"] if r["ok"]]
    assert len(done) == 4
    for request in done:
        sizes = request["tokens_per_chunk"]
        assert sizes is not None and sum(sizes) == request["output_tokens"] == TOKENS, sizes
        assert sizes[0] == 1 and all(size >= 4 for size in sizes[1:-1]), sizes  # first alone, then 4 or more
        # a gap the client caused (its meter read late) is left out with the tokens of the chunk it ended
        theirs = request["client_gaps"]
        assert len(request["itl_s"]) == TOKENS - 1 - sum(sizes[i + 1] for i in theirs), theirs
        assert len(request["chunk_gaps_s"]) == len(sizes) - 1 - len(theirs)
        if not theirs:  # per token, the mean is TPOT: each chunk's gap spread over the tokens it carried
            assert statistics.mean(request["itl_s"]) == pytest.approx(request["tpot_s"], rel=0.03)
    trusted = [r for r in done if not r["burst"] and not r["cold"]] or done[1:]
    for request in trusted:
        # a chunk is several of the server's steps; a token one step's share: steady, and near the server's own gap
        itl, gaps = statistics.median(request["itl_s"]), statistics.median(request["chunk_gaps_s"])
        assert gaps >= 3 * itl, (gaps, itl)
        split = request["server_split"]
        server_gap = split["decode_s"] / (split["output_tokens"] - 1)
        assert statistics.mean(request["itl_s"]) == pytest.approx(server_gap, rel=0.25), request["burst"]
    assert main(["probe", "--url", speculating.url, "--prompt", PROMPT, "--max-tokens", "16", "--timeout",
                 CLIENT_TIMEOUT_S, "--no-save"]) == 0
    assert "ITL is per token: chunks carried" in capsys.readouterr().out, "the table says which figure it shows"


def test_the_spec_decode_counters_read_as_acceptance_and_tokens_a_step(capsys, speculating):
    code, _, err = phasetop_json(capsys, "probe", "--url", speculating.url, "--prompt", PROMPT, "--max-tokens",
                                 str(TOKENS), "--timeout", CLIENT_TIMEOUT_S, "--no-save")
    assert code == 0, err
    code, document, err = phasetop_json(capsys, "metrics", "--url", speculating.url, "--once")
    assert code == 0, err
    spec = document["speculation"]
    assert spec is not None and spec["drafts"] > 0 and spec["num_speculative_tokens"] == pytest.approx(3, abs=0.5)
    assert 0 < spec["accepted_tokens"] <= spec["draft_tokens"]
    assert 1 < spec["mean_accepted_length"] <= 4
    rates = spec["position_rates"]
    assert len(rates) == 3 and rates[0] >= rates[1] >= rates[2], rates  # a later draft needs every one before it
    assert document["source_names"]["spec_drafts_total"] == "vllm:spec_decode_num_drafts_total"
