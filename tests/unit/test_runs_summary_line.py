"""The one line a compare says of each run: requests that failed and requests timed in bursts are not the same."""

from datetime import UTC, datetime

from tui.core.runs.run_record import compare_runs, new_run

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def request(ok=True, burst=None):
    return {"ok": ok, "burst": burst, "ttft_s": 0.05, "itl_s": [0.005, 0.005], "tpot_s": 0.005, "e2e_s": 0.06,
            "decode_tok_s": 200.0, "prefill_tok_s": 4000.0}


def test_a_burst_is_left_out_and_said_so_and_a_failure_is_a_failure():
    identity = {"url": "http://h:1", "kind": "openai", "model": "m", "version": None, "max_model_len": None,
                "engine_config": None, "process_start_time": None, "simulator_flags": None}
    mixed = new_run("probe", {}, identity, [request(), request(burst="clumped"), request(burst="clumped"),
                                            request(ok=False)], {}, T0, T0)
    plain = new_run("probe", {}, identity, [request()], {}, T0, T0)
    lines = compare_runs(mixed, plain)
    text = str(lines)
    assert "1 request (1 failed; 2 timed delivery, not generation, left out)" in text
    assert "failed" not in str(compare_runs(plain, plain))
