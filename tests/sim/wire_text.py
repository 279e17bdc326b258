"""Reading the simulator's wire in tests: SSE events and /metrics samples, through prometheus-client's parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def events(body: str) -> list[str]:
    """SSE `data:` payloads; every event must be exactly one data line and a blank line."""
    assert body.endswith("\n\n")
    blocks = body[:-2].split("\n\n")
    assert all(block.startswith("data: ") and "\n" not in block for block in blocks)
    return [block[len("data: "):] for block in blocks]


def samples(text: str) -> dict[str, list]:
    found: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append(sample)
    return found


def value(text: str, name: str, **labels: str) -> float:
    matches = [s.value for s in samples(text)[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(matches) == 1, (name, labels)
    return matches[0]
