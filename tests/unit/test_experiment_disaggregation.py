import pytest

from tui.core.experiments.disaggregation import KV_LINKS, link_of_rate
from tui.core.experiments.columns import describe_row
from tui.core.experiments.setups import disaggregation_row, setups
from tui.core.experiments.findings import finding, finding_figures
from tui.core.measure.records import RequestTiming, ServerSplit


def stream(stall_s: float, at_s: float = 0.3) -> RequestTiming:
    """A stream sent at 0 with a token every 5 ms and one gap of `stall_s` starting at `at_s`."""
    offsets, t = [], 0.01
    while t < 1.0:
        offsets.append(round(t, 6))
        t += stall_s if abs(t - at_s) < 0.0025 else 0.005
    return RequestTiming(ok=True, t_sent_unix=1000.0, token_offsets_s=tuple(offsets), output_tokens=len(offsets))


def long_prompt(ttft_s: float, transfer_s: float | None = None) -> RequestTiming:
    split = ServerSplit(kv_transfer_s=transfer_s, kv_transfer_bytes=524_156_928 if transfer_s else None)
    return RequestTiming(ok=True, t_sent_unix=1000.25, token_offsets_s=(ttft_s,), output_tokens=1, server_split=split)


ROWS = {  # worst gap during the long prefill, its TTFT, its transfer
    "one-device": (0.143, 0.150, None),
    "chunked": (0.021, 0.160, None),
    "1p1d": (0.0055, 0.162, 0.011),
    "split": (0.010, 0.290, 0.0008),
}


def rows(order=("one-device", "chunked", "1p1d", "split")) -> list[dict]:
    by_key = {s.key: s for s in setups(KV_LINKS["ndr"])}
    return [disaggregation_row(by_key[key], 4000, [([stream(ROWS[key][0]) for _ in range(8)],
                                                    long_prompt(ROWS[key][1], ROWS[key][2]))]) for key in order]


def test_the_four_setups_and_their_simulator_flags():
    assert [(s.key, s.label, s.sim_args) for s in setups(KV_LINKS["ndr"])] == [
        ("one-device", "one device, chunked prefill off", ("--no-enable-chunked-prefill",)),
        ("chunked", "one device, chunks of 512", ("--max-num-batched-tokens", "512")),
        ("1p1d", "1P1D over InfiniBand NDR", ("--disaggregated", "--kv-link", "ndr")),
        ("split", "1P1D split on one device", ("--disaggregated", "--split-one-device")),
    ]
    assert setups(link_of_rate(25))[2].sim_args == ("--disaggregated", "--kv-link-gbs", "25")


def test_a_row_holds_the_worst_gap_against_the_median_the_ttft_and_its_transfer_share():
    one, _, pd, _ = rows()
    assert one["itl_worst_s"] == pytest.approx(0.143) and one["itl_p50_s"] == pytest.approx(0.005)
    assert one["worst_vs_p50"] == pytest.approx(28.6)
    assert one["kv_transfer_s"] is None and one["transfer_share"] is None
    assert pd["transfer_share"] == pytest.approx(0.011 / 0.162)
    assert pd["aggregate_tok_s"] > 0 and pd["streams"] == 8
    assert describe_row("disaggregation", pd).startswith("setup 1P1D over InfiniBand NDR, long prompt tokens 4,000, "
                                                          "worst gap 5.50 ms")


def test_the_finding_judges_each_setup_apart_on_both_phases_against_the_best_colocated():
    line = finding("disaggregation", rows())
    assert line.startswith("1P1D over InfiniBand NDR: not worth it — streams' worst gap ×0.26 of the best colocated "
                           "(chunks of 512: 21.0 → 5.50 ms, better), long-prompt TTFT ×1.1 (150 → 162 ms, 7 % of it the "
                           "KV transfer, worse)"), line
    assert "; 1P1D split on one device: not worth it" in line


def test_over_10_gbe_1p1d_is_not_worth_it_and_chunked_prefill_buys_most_of_the_gain():
    """The issue's run: the long prompt's TTFT 143 → 579 ms over 10 GbE, 72.5 % of it the KV transfer."""
    measured = {"one-device": (0.143, 0.143, None), "chunked": (0.0219, 0.145, None), "1p1d": (0.0055, 0.579, 0.42),
                "split": (0.010, 0.290, 0.0008)}
    by_key = {s.key: s for s in setups(KV_LINKS["10gbe"])}
    line = finding("disaggregation", [
        disaggregation_row(by_key[key], 4000, [([stream(gap) for _ in range(8)], long_prompt(ttft, transfer))])
        for key, (gap, ttft, transfer) in measured.items()])
    assert line.startswith("1P1D over 10 GbE: not worth it") and "143 → 579 ms, 73 % of it the KV transfer, worse" in line
    assert ("Chunked prefill buys most of the gain at no TTFT cost: chunks of 512 cut the worst gap "
            "143 → 21.9 ms, TTFT ×1.0") in line, line
    assert line.endswith("(1 round a setup: called on ±5 % of the medians, not sure; --repeat 5 would tell)")


def test_with_slos_a_setup_apart_is_worth_it_where_it_alone_meets_both():
    line = finding("disaggregation", rows(), slos=(0.200, 0.010))
    assert line.startswith("1P1D over InfiniBand NDR: worth it") and "meets the SLOs (TTFT ≤ 200 ms, worst gap ≤ 10.0 ms)" in line
    loose = finding("disaggregation", rows(), slos=(0.200, 0.025))
    assert loose.startswith("1P1D over InfiniBand NDR: not worth it") and "as a colocated setup does" in loose


def test_the_finding_without_the_baseline_or_when_one_device_wins():
    assert finding("disaggregation", rows(("1p1d", "split"))) == "not enough setups measured to compare"
    baseline_best = rows(("one-device",))[0] | {"itl_worst_s": 0.001}
    assert finding("disaggregation", [baseline_best, rows(("1p1d",))[0]]).startswith(
        "1P1D over InfiniBand NDR: not worth it — streams' worst gap ×5.5 of the best colocated")


def test_with_five_rounds_a_setup_each_call_is_ranked_over_the_rounds_and_sure():
    """10 GbE again, each setup's stall and TTFT a little different each round: 1P1D's TTFT is above every colocated
    round (sure: worse), its worst gap below every one (sure: better)."""
    measured = {"one-device": (0.143, 0.143, None), "chunked": (0.0219, 0.145, None), "1p1d": (0.0055, 0.579, 0.42),
                "split": (0.010, 0.290, 0.0008)}
    by_key = {s.key: s for s in setups(KV_LINKS["10gbe"])}

    def rounds(gap, ttft, transfer):
        return [([stream(gap * (1 + 0.01 * k)) for _ in range(8)], long_prompt(ttft * (1 + 0.01 * k), transfer))
                for k in range(5)]

    measured_rows = [disaggregation_row(by_key[key], 4000, rounds(*figures)) for key, figures in measured.items()]
    assert measured_rows[2]["rounds"]["ttft_s"] == pytest.approx([0.579 * (1 + 0.01 * k) for k in range(5)])
    line = finding("disaggregation", measured_rows)
    assert line.startswith("1P1D over 10 GbE: not worth it") and "worse" in line and "not sure" not in line, line
    figures = {(f["to"], f["figure"]): f for f in finding_figures("disaggregation", measured_rows)}
    assert figures[("1P1D over 10 GbE", "ttft_s")]["verdict"] == "worse"
    assert figures[("1P1D over 10 GbE", "itl_worst_s")]["verdict"] == "better"
    assert figures[("1P1D over 10 GbE", "itl_worst_s")]["from"] == "one device, chunks of 512"


def test_with_one_round_a_setup_the_figures_say_not_enough_whatever_the_band_calls():
    figures = finding_figures("disaggregation", rows())
    assert {f["verdict"] for f in figures} == {"not_enough_data"}
    assert {f["more_requests"] for f in figures} == {4}  # 5 rounds a setup would tell
