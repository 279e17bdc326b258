"""The disaggregation experiment's setups and rows: the interference workload (streams decoding, a long prompt
lands) on one device and on 1P1D, so the streams' worst gap and the long prompt's TTFT say whether it is worth it.

Pure: `tui.sources.workloads.disaggregation` starts phasetop's simulator in each setup and times the requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tui.core.experiments.disaggregation import KV_LINKS, KvLink
from tui.core.experiments.rows import aggregate_tok_s, finished, interference_row, p50_of
from tui.core.measure.records import RequestTiming
from tui.core.measure.stats import summarize

CHUNK_TOKENS = 512
"""The chunked-prefill setup's `--max-num-batched-tokens`."""


@dataclass(frozen=True, slots=True)
class Setup:
    """One server configuration of the experiment: a key, the row's label, and `phasetop sim`'s flags for it."""

    key: str
    label: str
    sim_args: tuple[str, ...]


def setups(link: KvLink) -> tuple[Setup, ...]:
    """The four configurations on the same hardware, in the order the table shows them; 1P1D moves the KV over `link`."""
    preset = next((name for name, preset in KV_LINKS.items() if preset == link), None)
    link_args = ("--kv-link", preset) if preset else ("--kv-link-gbs", f"{link.gbs:g}")
    return (
        Setup("one-device", "one device, chunked prefill off", ("--no-enable-chunked-prefill",)),
        Setup("chunked", f"one device, chunks of {CHUNK_TOKENS}", ("--max-num-batched-tokens", str(CHUNK_TOKENS))),
        Setup("1p1d", f"1P1D over {link.name}", ("--disaggregated", *link_args)),
        Setup("split", "1P1D split on one device", ("--disaggregated", "--split-one-device")),
    )


def setups_server(link: KvLink, gpu: str, model: str) -> dict[str, Any]:
    """The run's `server` for this experiment: phasetop's simulator on `gpu` with `model`, in each setup over `link`
    (there is no one server to identify)."""
    return {"kind": "openai", "simulator": "phasetop sim", "gpu": gpu, "model": model, "kv_link": link.name,
            "kv_link_gbs": link.gbs,
            "setups": [{"key": s.key, "label": s.label, "sim_args": list(s.sim_args)} for s in setups(link)]}


def disaggregation_row(setup: Setup, prompt_tokens: int,
                       rounds: Sequence[tuple[Sequence[RequestTiming], RequestTiming]]) -> dict[str, Any]:
    """The running streams' worst gap while the long prompt was in flight (its median round's) against their ITL over
    the whole run, the long prompt's TTFT and the share of it its KV transfer took, and the aggregate rate; `rounds`
    keeps each round's worst gap and TTFT, which the finding ranks to say how sure it is."""
    interference = interference_row(prompt_tokens, rounds)
    itl = summarize(gap for background, _ in rounds for timing in finished(background) for gap in timing.itl_s)
    intruders = [intruder for _, intruder in rounds if intruder.ok]
    ttft = p50_of(t.ttft_s for t in intruders)
    transfer = p50_of(t.server_split.kv_transfer_s for t in intruders
                    if t.server_split is not None and t.server_split.kv_transfer_s is not None)
    worst = interference["itl_during_s"]
    return {
        "setup": setup.label,
        "setup_key": setup.key,
        "prompt_tokens": prompt_tokens,
        "streams": interference["streams"],
        "itl_worst_s": worst,
        "itl_p50_s": itl.p50,
        "itl_p99_s": itl.p99,
        "worst_vs_p50": worst / itl.p50 if worst is not None and itl.p50 else None,
        "ttft_s": ttft,
        "kv_transfer_s": transfer,
        "transfer_share": transfer / ttft if transfer is not None and ttft else None,
        "aggregate_tok_s": p50_of(aggregate_tok_s([*background, intruder]) for background, intruder in rounds),
        "n": len(rounds),
        "bursts": interference["bursts"],
        "rounds": {"itl_worst_s": interference["itl_during_rounds_s"], "ttft_s": [t.ttft_s for t in intruders]},
    }
