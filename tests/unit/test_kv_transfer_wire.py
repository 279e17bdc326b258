import pytest

from tui.sources.chunks import Tally, read_openai
from tui.sources.errors import ProtocolError

METRICS = {"time_to_first_token_ms": 160.0, "generation_time_ms": 35.0, "queue_time_ms": 1.0, "mean_itl_ms": 5.0,
           "tokens_per_second": 40.0}


def split_of(metrics: dict):
    tally = Tally()
    read_openai({"choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 8}, "metrics": metrics}, tally)
    return tally.split


def test_a_disaggregated_fronts_transfer_rides_in_the_per_request_metrics():
    split = split_of({**METRICS, "kv_transfer_time_ms": 105.0, "kv_transfer_bytes": 130_940_928})
    assert split.kv_transfer_s == pytest.approx(0.105) and split.kv_transfer_bytes == 130_940_928
    assert split.prefill_s == pytest.approx(0.160)  # the transfer sits inside it
    assert split.to_json()["kv_transfer_s"] == pytest.approx(0.105)


def test_without_a_transfer_the_fields_are_none_and_bad_bytes_are_one_line():
    split = split_of(METRICS)
    assert split.kv_transfer_s is None and split.kv_transfer_bytes is None
    assert split.to_json()["kv_transfer_bytes"] is None
    with pytest.raises(ProtocolError, match="metrics.kv_transfer_bytes is a string"):
        split_of({**METRICS, "kv_transfer_bytes": "lots"})
