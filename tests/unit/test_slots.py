"""llama.cpp's /slots, as llama-server b11434 answers it (tests/fixtures/llamacpp-slots.json, params dropped)."""

from __future__ import annotations

import json
from pathlib import Path

from tui.core.telemetry.slots import SlotState, read_slots, slots_line

FIXTURE = Path(__file__).parents[1] / "fixtures" / "llamacpp-slots.json"


def test_reads_idle_and_processing_slots_of_a_real_answer():
    slots = read_slots(json.loads(FIXTURE.read_text()))
    assert [s.id for s in slots] == [0, 1, 2, 3]
    assert all(s.n_ctx == 2048 for s in slots)
    never_used, busy = slots[0], slots[3]
    assert never_used == SlotState(id=0, state="idle", n_ctx=2048)
    assert busy.state == "processing" and busy.id_task == 10
    # A repeated 226-token prompt: 221 from the cache, 5 computed; 12 generated so far, counted in n_prompt_tokens.
    assert (busy.n_prompt_tokens_cache, busy.n_prompt_tokens_processed, busy.n_decoded) == (221, 5, 12)
    assert busy.n_prompt_tokens == 226 + 12


def test_older_shapes_and_other_servers():
    # Older builds: `state` 0/1 and one next_token dict instead of a list.
    old = read_slots([{"id": 0, "state": 1, "n_ctx": 512, "next_token": {"n_decoded": 3}}])
    assert old == [SlotState(id=0, state="processing", n_ctx=512, n_decoded=3)]
    assert read_slots({"error": {"code": 501, "message": "This server does not support slots endpoint."}}) is None
    assert read_slots([{"name": "not a slot"}]) is None


def test_one_line_names_the_busy_slots():
    slots = read_slots(json.loads(FIXTURE.read_text()))
    assert slots_line(slots) == "slots 1 of 4 processing: #3 prompt 226 (221 cached), 12 generated"
    assert slots_line([SlotState(id=0, state="idle")]) == "slots 0 of 1 processing"
