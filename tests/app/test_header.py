"""The header: engine, model, state, and the config a restart changes, whole at any width."""

import time

from textual.app import App, ComposeResult

from tests.app.harness import wait_for
from tui.app.app import PhasetopApp
from tui.app.messages import ServerCameUp
from tui.app.widgets.status_line import StatusLine, describe
from tui.core.state.server_state import ServerState
from tui.config import Settings

TCSS = "../../tui/app/phasetop.tcss"


def rows(app, widget) -> list[str]:
    """The header's rows as painted on the screen."""
    strips = app.screen._compositor.render_strips()
    return [strips[y].text[widget.region.x:widget.region.right].rstrip() for y in range(widget.region.y, widget.region.bottom)]


async def test_at_160_columns_the_header_shows_the_simulators_config_whole(sim_url):
    seen = []
    app = PhasetopApp(Settings(_env_file=None), sim_url, "simulated H100 SXM · Llama-3.1-8B", None)
    async with app.run_test(size=(160, 45), message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: any(isinstance(m, ServerCameUp) for m in seen))
        # The batch size comes from the simulator's published flags (vLLM's /metrics has none), the rest from /metrics.
        await wait_for(pilot, lambda: "max_num_batched_tokens" in (app.screen.server.config or ""))
        await pilot.pause(0.1)
        painted = rows(app, app.screen.query_one(StatusLine))
        text = "\n".join(painted)
        for shown in ("simulated H100 SXM", "openai http://", " up ", "Llama-3.1-8B", "max_num_batched_tokens=2048",
                      "enable_prefix_caching=True", "max_model_len=131072", "block_size=16"):
            assert shown in text, f"{shown!r} not in {painted}"
        assert not any(row.endswith("·") for row in painted), painted
        assert all(len(row) <= 158 for row in painted)


class _HeaderHost(App):
    CSS_PATH = TCSS

    def __init__(self, state: ServerState) -> None:
        super().__init__()
        self.state = state

    def compose(self) -> ComposeResult:
        line = StatusLine(id="status")
        line.state = self.state
        yield line


async def test_a_down_reason_is_shown_whole_wrapped_not_cut():
    reason = "http://10.0.0.1:8000/v1/models: connection refused " + "after retrying the server several times " * 3 + "END"
    app = _HeaderHost(ServerState(url="http://10.0.0.1:8000", down_since=time.time(), down_reason=reason))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        status = app.query_one(StatusLine)
        painted = rows(app, status)
        assert status.has_class("-down") and len(painted) >= 2
        assert "END" in painted[-1] and "DOWN since" in "".join(painted[:2])


def test_an_api_that_never_answered_is_named_unknown_once_down_and_connecting_before():
    assert "connecting…" in describe(ServerState(url="http://h:1"))
    down = describe(ServerState(url="http://h:1", down_since=time.time(), down_reason="refused"))
    assert "unknown API http://h:1" in down and "?" not in down


SIMULATED = ServerState(url="http://127.0.0.1:41557", kind="openai", model="meta-llama/Llama-3.1-8B-Instruct",
                        simulated="simulated H100 SXM · Llama-3.1-8B", ceiling_tok_s=209.0,
                        config="max_num_batched_tokens=2048 enable_prefix_caching=True max_model_len=131072 "
                               "block_size=16 num_gpu_blocks=26702")


async def test_at_80_and_120_columns_the_header_keeps_every_part_whole_and_the_config_in_view():
    for size in ((80, 24), (120, 40)):
        app = _HeaderHost(SIMULATED)
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            painted = rows(app, app.query_one(StatusLine))
        text = " ".join(painted)
        for setting in SIMULATED.config.split():
            assert setting in text, f"{setting} not shown at {size}: {painted}"
        assert "ceiling 209 tok/s" in "\n".join(painted), f"a part broken across rows at {size}: {painted}"
        assert len(painted) <= 4 and all(len(row) <= size[0] for row in painted), painted


def test_the_config_sits_beside_the_server_when_it_fits_and_below_when_not():
    state = ServerState(url="http://h:1", kind="openai", model="m", config="block_size=16")
    assert describe(state, 200) == "openai http://h:1 · up · m · block_size=16"
    assert describe(state, 30) == "openai http://h:1 · up · m\nblock_size=16"


def test_the_config_comes_from_metrics_first_and_a_simulators_flags_for_what_they_lack():
    line = ServerState.config_from({"enable_prefix_caching": "False", "block_size": "16", "kv_cache_layout": "None"},
                                   {"max_num_batched_tokens": "2048", "enable_prefix_caching": "True", "gpu": "H100"})
    assert line == "max_num_batched_tokens=2048 enable_prefix_caching=False block_size=16"
    assert ServerState.config_from({}) is None


def test_server_sent_fields_are_one_line_and_redacted_of_control_characters():
    state = ServerState(url="http://user:pw@h:1", kind="openai", model="evil\x1b[31m\nmodel", config="block_size=16\x1b]0;t\x07")
    text = describe(state, 200)
    assert "\x1b" not in text and "\x07" not in text and "pw" not in text and "\n" not in text


def test_the_device_is_named_for_a_server_phasetop_did_not_start_and_not_twice_for_its_own_simulator():
    real = ServerState(url="http://h:1", kind="openai", model="m", device="NVIDIA H100 80GB HBM3", ceiling_tok_s=209.0)
    assert describe(real, 200) == "openai http://h:1 · up · m · on NVIDIA H100 80GB HBM3 · ceiling 209 tok/s"
    own = ServerState(url="http://h:1", kind="openai", model="m", simulated="simulated H100 SXM · Llama-3.1-8B",
                      device="simulated H100 SXM")
    assert describe(own, 200).count("H100") == 1
