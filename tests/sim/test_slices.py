"""Long route work in slices: the same tokens and bytes as in one go, and the loop's timers run between the slices."""

from __future__ import annotations

import asyncio
import random

import httpx
from starlette.responses import JSONResponse

from tui.sim import slices, tokenizer


def test_a_text_in_slices_tokenizes_as_the_whole_does():
    alphabet = ["a", "b", "Z", "é", "7", "_", " ", "  ", "\n", "\t", ",", ".", "!", "-", "日", "abcdefghijklmnopq"]
    rng = random.Random(5)
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 120)))
        for size in (1, 3, 8, 25):
            pieces = tokenizer.text_slices(text, size)
            assert "".join(pieces) == text
            assert [token for piece in pieces for token in tokenizer.tokenize(piece)] == tokenizer.tokenize(text), (text, size)


async def test_the_loop_runs_its_timers_between_slices_and_two_jobs_take_turns():
    seen: list[str] = []
    loop = asyncio.get_running_loop()

    def work(item: str) -> str:
        seen.append(item)
        if item == "a1":
            loop.call_soon(seen.append, "due")  # as a step's timer falls due while a slice runs
        return item.upper()

    first, second = await asyncio.gather(slices.in_slices(["a1", "a2", "a3"], work), slices.in_slices(["b1", "b2"], work))
    assert first == ["A1", "A2", "A3"] and second == ["B1", "B2"]
    assert seen.index("due") < seen.index("a2")  # the slice after the first waits for the loop's turn
    later = [item for item in seen if item not in ("due", "a1", "b1")]
    assert later == ["a2", "b2", "a3"]  # one slice of each job in turn


async def test_tokenize_writes_a_long_prompt_s_answer_as_json_response_would(sim):
    prompt = "Prefill reads the whole prompt, in one pass; ü " * 2000 + "  "  # about 90 kB: many slices
    async with httpx.AsyncClient(base_url=sim.url, timeout=30) as client:
        for strs in (True, False):
            response = await client.post("/tokenize", json={"prompt": prompt, "return_token_strs": strs})
            pieces = tokenizer.tokenize(prompt)
            expected = {"count": len(pieces), "max_model_len": response.json()["max_model_len"],
                        "tokens": tokenizer.encode(prompt), "token_strs": pieces if strs else None}
            assert response.content == JSONResponse(expected).body
            assert response.headers["content-type"] == "application/json"
