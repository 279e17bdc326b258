import pytest

from tui.core.hardware.devices import find_device
from tui.core.experiments.disaggregation import (
    KV_LINKS,
    KV_TRANSFER_LATENCY_S,
    device_copy_link,
    find_link,
    kv_transfer_bytes,
    kv_transfer_tokens,
    link_of_rate,
    split_memory_utilization,
    time_sliced_s,
)
from tui.core.hardware.models import MODELS


def test_a_4000_token_prompt_of_the_8b_layout_is_about_512_mib_of_kv():
    nbytes = kv_transfer_bytes(MODELS["8b"], 4000)
    assert nbytes == 4000 * 128 * 1024 == 524_288_000  # 500 MiB, "≈ 512 MB" in the round figures
    assert kv_transfer_bytes(MODELS["8b"], 1) == 131072


def test_the_decode_worker_recomputes_the_last_prompt_token():
    assert kv_transfer_tokens(4000) == 3999
    assert kv_transfer_tokens(1) == 0


@pytest.mark.parametrize(("name", "gbs"), [("nvlink", 900), ("ndr", 50), ("100gbe", 12.5), ("10gbe", 1.25)])
def test_link_presets_and_transfer_time_is_bytes_over_rate_plus_latency(name, gbs):
    link = find_link(name.upper())
    assert link is KV_LINKS[name] and link.gbs == gbs
    assert link.transfer_s(gbs * 1e9) == pytest.approx(1 + KV_TRANSFER_LATENCY_S)
    assert link.transfer_s(0) == KV_TRANSFER_LATENCY_S


def test_a_4000_token_prompt_over_each_link():
    nbytes = kv_transfer_bytes(MODELS["8b"], 3999)
    seconds = {name: link.transfer_s(nbytes) for name, link in KV_LINKS.items()}
    assert seconds["ndr"] == pytest.approx(0.0110, abs=0.0001)  # the "+11 ms of transfer"
    assert seconds["nvlink"] == pytest.approx(0.00108, abs=0.00001)
    assert seconds["10gbe"] == pytest.approx(0.420, abs=0.001)


def test_a_rate_is_a_link_and_nonsense_is_refused():
    assert find_link("25").gbs == 25 and find_link("25").name == "25 GB/s"
    with pytest.raises(ValueError, match="unknown KV link 'carrier pigeon'"):
        find_link("carrier pigeon")
    for bad in (0, -1, float("inf")):
        with pytest.raises(ValueError, match="above 0"):
            link_of_rate(bad)


def test_one_device_copies_at_half_its_bandwidth_and_splits_its_time_and_memory():
    h100 = find_device("H100")
    assert device_copy_link(h100).gbs == 1675
    assert time_sliced_s(0.005, 2) == 0.010
    assert time_sliced_s(0.005, 0) == 0.005
    assert split_memory_utilization(0.9, 2) == 0.45
