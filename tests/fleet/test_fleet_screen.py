"""The fleet screen under Textual's pilot, on the fleet lab (a real Prometheus on three simulators and two DCGM
stand-ins) with a load running, at 80×24 and 160×45; and `phasetop --prometheus` on a closed port in a real terminal.

The load keeps the decode server (127.0.0.3, 8 seats) over full, so it is the saturated one. Prometheus stopping
comes last: it ends the lab for this module.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace
from functools import partial

import pytest
from textual.widgets import DataTable, Input, Static

import tui.app.screens.fleet as fleet_screens
from tests.app.harness import shows
from tests.app.test_key_walk import footer_inside, keys_of, press_and_see
from tests.terminal.tmux_pane import exit_line, run_sized, tmux, wait_for
from tui.app.app import PhasetopApp
from tui.app.fleet_messages import FleetRead
from tui.app.screens.fleet import SORT_CYCLE, FleetScreen, FleetTable, InstanceScreen
from tui.config import Settings
from tui.core.fleet.instances import SORT_COLUMNS
from tui.core.fleet.text import row_cells
from tui.fleet_lab import send_load
from tui.sources.prometheus import prometheus_client, query, read_fleet

SIZES = [(80, 24), (160, 45)]
DEADLINE_S = 30.0
LOAD = ((1, 300, 32), (10, 50, 200), (1, 50, 32))
"""Per simulator (clients, prompt words, max tokens): the decode server gets more streams than its 8 seats."""


@pytest.fixture(scope="module")
def loaded(lab):
    stop = threading.Event()
    threads = send_load(lab, stop, LOAD)
    yield lab
    stop.set()
    for thread in threads:
        thread.join(10)


def fleet_app(url: str, live: bool = True) -> tuple[PhasetopApp, FleetScreen]:
    settings = Settings(_env_file=None, prometheus={"url": url, "role_label": "role"})
    screen = FleetScreen(settings, url, live=live)
    screen.save_runs = False
    return PhasetopApp(settings, url, save_runs=False, first=screen), screen


async def until(pilot, condition, what: str, timeout_s: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:.0f} s"
        await pilot.pause(0.1)


def text_of(screen, selector: str) -> str:
    return str(screen.query_one(selector, Static).content)


def table_rows(screen) -> dict[str, list[str]]:
    """The table's rows by key, each its cells as plain text, in the order shown."""
    table = screen.query_one(DataTable)
    return {row.key.value: [str(cell) for cell in table.get_row(row.key)] for row in table.ordered_rows}


def column_index(screen, name: str) -> int:
    return [c.key.value for c in screen.query_one(DataTable).ordered_columns].index(name)


def busy(fleet) -> bool:
    """Every instance has figures and the decode server is saturated: the load is in Prometheus."""
    return (len(fleet.instances) == 3 and all(r.generation_tok_s and r.itl.p99_s is not None for r in fleet.instances)
            and any(r.host == "127.0.0.3" and r.saturated for r in fleet.instances))


def pools_fit(screen) -> bool:
    """Each pool's lines fit the pane, so none wraps on its own inside a figure ("6.5" over "tok/s")."""
    width = screen.query_one("#fleet-pools").content_size.width
    pool_lines = text_of(screen, "#fleet-pools").split("fleet: TTFT")[0].rstrip("\n").split("\n")
    return all(len(line) <= width for line in pool_lines)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_rows_with_figures_and_the_saturated_named(loaded, size):
    app, screen = fleet_app(loaded.prometheus_url)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: screen.fleet is not None and busy(screen.fleet), "three busy rows")
        await pilot.pause(0.2)
        fleet = screen.fleet
        rows = table_rows(screen)
        sims = {sim.url.removeprefix("http://"): sim for sim in loaded.sims}
        assert sorted(rows) == sorted(f"vllm/{address}" for address in sims)
        by_key = {r.key: r for r in fleet.instances}
        for key, cells in rows.items():
            expected = row_cells(by_key[key])
            for name in ("instance", "role", "status", "run/wait", "KV", "TTFT p99", "ITL p99", "gen tok/s", "DRAM GB/s", "decode"):
                assert cells[column_index(screen, name)] == expected[name], (key, name)
            assert cells[column_index(screen, "gen tok/s")] != "–" and cells[column_index(screen, "decode")].endswith("%")
        prefill, decode, small = (f"vllm/{sim.url.removeprefix('http://')}" for sim in loaded.sims)
        # DCGM's fixed DRAM active × the H100's 3,350 GB/s: 0.6 × 1 GPU, 0.25 × 2 GPUs; the third host has no DCGM.
        assert rows[prefill][column_index(screen, "DRAM GB/s")] == "2,010 (60%)"
        assert rows[decode][column_index(screen, "DRAM GB/s")] == "1,675 (25%)"
        assert rows[small][column_index(screen, "DRAM GB/s")] == "–"
        assert [rows[k][column_index(screen, "role")] for k in (prefill, decode, small)] == ["prefill", "decode", "–"]
        # The saturated one named above the table and marked in it.
        assert decode in fleet.saturated
        callouts = text_of(screen, "#fleet-callouts")
        assert "saturated" in callouts and decode in callouts
        assert "SAT" in rows[decode][column_index(screen, "mark")]
        if fleet.slowest:
            assert f"slowest (ITL p99): {fleet.slowest}" in callouts and "SLOW" in rows[fleet.slowest][0]
        # Pools and the fleet's merged p99s under it; a quantile on a bucket edge is a bound, as the CLI shows it.
        pools = text_of(screen, "#fleet-pools")
        assert "prefill pool (1): running" in pools and "decode pool (1): running" in pools
        # Each pool's lines fit the pane, so none wraps on its own inside a figure ("6.5" over "tok/s").
        assert pools_fit(screen), text_of(screen, "#fleet-pools")
        assert "fleet: TTFT p99 " in pools and "ITL p99 " in pools
        itl = fleet.merged["itl"]
        if itl.edges.get("p99") == "first":
            assert "ITL p99 ≤10 ms" in pools
        # DCGM's GPUs under them: the fixed DRAM active as GB/s of the device's peak.
        assert "127.0.0.2 GPU 0 NVIDIA H100 SXM: DRAM active 60% = 2,010 of 3,350 GB/s, SM 40%, tensor 20%" in pools
        title = text_of(screen, "#fleet-title")
        assert "3 instances" in title and "sort: instance A→Z" in title
        assert not screen.query_one("#fleet-error").has_class("-shown")
        await pilot.resize_terminal(80, 24)  # narrowed: the pools break again at the new width
        await until(pilot, lambda: pools_fit(screen), "the pools' lines fitting 80 columns")
        print(f"{size}: read and shown in {screen.read_to_shown_s:.2f} s (the read itself {fleet.read_s:.2f} s)")


async def test_sort_key_changes_the_order(loaded):
    app, screen = fleet_app(loaded.prometheus_url)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: screen.fleet is not None and busy(screen.fleet), "three busy rows")
        decode = f"vllm/{loaded.sims[1].url.removeprefix('http://')}"
        assert list(table_rows(screen)) == sorted(table_rows(screen))  # by instance, A→Z
        assert list(table_rows(screen))[0] != decode
        while screen.sort_column != "running":
            await pilot.press("o")
        await pilot.pause(0.1)
        # The decode server runs its 8 seats full; the others one stream each at most.
        assert list(table_rows(screen))[0] == decode
        assert "sort: running largest first" in text_of(screen, "#fleet-title")
        # A column's header picks it: the sorted one carries the arrow.
        await pilot.press("O")
        assert screen.sort_column == "status"
        labels = [str(c.label) for c in screen.query_one(DataTable).ordered_columns]
        assert "status▲" in labels and "instance" in labels
        assert set(SORT_CYCLE) == set(SORT_COLUMNS), "o reaches every sort column"


async def test_label_filter_narrows_the_rows(loaded):
    app, screen = fleet_app(loaded.prometheus_url)
    async with app.run_test(size=(80, 24)) as pilot:
        started = time.monotonic()
        await until(pilot, lambda: screen.fleet is not None and len(table_rows(screen)) == 3, "three rows")
        print(f"first rows after {time.monotonic() - started:.2f} s")
        decode = f"vllm/{loaded.sims[1].url.removeprefix('http://')}"
        box = screen.query_one(Input)

        async def apply(text: str) -> None:
            """Type `text` into the filter box (one assignment: Pilot's press waits on the poll, key by key) and Enter."""
            await pilot.press("slash")
            assert screen.focused is box
            box.value = text
            await pilot.press("enter")

        await apply("role=decode")
        await until(pilot, lambda: list(table_rows(screen)) == [decode], "the decode row alone")
        assert 'filter role="decode"' in text_of(screen, "#fleet-title") and screen.fleet.instances[0].key == decode
        print(f"filtered read shown {screen.read_to_shown_s:.2f} s after it began")
        await apply('role=~"pre.*"')
        prefill = f"vllm/{loaded.sims[0].url.removeprefix('http://')}"
        await until(pilot, lambda: list(table_rows(screen)) == [prefill], "the prefill row alone (a regex)")
        # Not a matcher: the box says so, the rows stay as they were filtered.
        await apply("=oops")
        await pilot.pause(0.2)
        assert box.has_class("-invalid") and list(table_rows(screen)) == [prefill]
        assert screen.focused is box  # still in the box, to mend it: an empty filter shows every row
        box.value = ""
        await pilot.press("enter")
        await until(pilot, lambda: len(table_rows(screen)) == 3, "every row again")
        assert not box.has_class("-invalid")


async def test_enter_opens_the_instance_and_escape_returns(loaded):
    app, screen = fleet_app(loaded.prometheus_url)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: screen.fleet is not None and len(table_rows(screen)) == 3, "three rows")
        sim = loaded.sims[1]
        key = f"vllm/{sim.url.removeprefix('http://')}"
        table = screen.query_one(DataTable)
        table.move_cursor(row=list(table_rows(screen)).index(key))
        await pilot.press("enter")
        await until(pilot, lambda: shows(app, InstanceScreen), "the main screen")
        instance = app.screen
        assert instance.server_url == sim.url
        # Its model from the server itself; its metrics through Prometheus: stamped with Prometheus's scrape of it.
        await until(pilot, lambda: instance.state.server.served is not None and instance.metrics is not None, "the instance's metrics")
        assert instance.state.server.served.model == "meta-llama/Llama-3.1-8B-Instruct"
        row = next(r for r in screen.fleet.instances if r.key == key)
        async with prometheus_client(Settings(_env_file=None), loaded.prometheus_url) as client:
            target = f'{{job="{row.job}",instance="{row.instance}"}}'
            scrapes = [value for _, value in await query(client, f"timestamp(up{target})")]
            generated = await query(client, f"vllm:generation_tokens_total{target}")
        await until(pilot, lambda: instance.metrics.t_unix >= scrapes[0] - 5, "a recent scrape")
        stamp_ms = instance.metrics.t_unix * 1000
        assert abs(stamp_ms - round(stamp_ms)) < 1e-3, "a scrape's stamp (whole ms), not this host's clock"
        assert instance.metrics.running is not None and instance.metrics.generation_tokens_total is not None
        own = sum(value for _, value in generated)
        assert abs(instance.metrics.generation_tokens_total - own) <= 0.2 * own + 64, "the series Prometheus holds"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "the fleet again")
        assert len(table_rows(screen)) == 3


@pytest.mark.parametrize("size", [*SIZES, (120, 40)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_every_key_the_fleet_names_works_there_and_leads_back(loaded, size, monkeypatch):
    """The key walk (tests/app/test_key_walk.py) on the fleet: each of its keys changes what is seen, the footer stays
    in the frame, the help and an instance (Enter) lead back with Escape, and so does the filter box. Reads are slowed
    to an hour, so a change is the key's."""
    monkeypatch.setattr(fleet_screens, "poll_fleet", partial(fleet_screens.poll_fleet, interval_s=3600))
    app, screen = fleet_app(loaded.prometheus_url)
    async with app.run_test(size=size, notifications=True) as pilot:
        await until(pilot, lambda: screen.fleet is not None and len(table_rows(screen)) == 3, "three rows")
        footer_inside(app)
        for binding in [*keys_of(screen), *keys_of(screen.query_one(FleetTable))]:
            where = f"{size[0]}×{size[1]} fleet · {binding.description}"
            await press_and_see(pilot, app, binding.key, where)
            if app.screen is not screen:  # the help, an instance: each names its way back
                footer_inside(app)
                await pilot.press("escape")
                await until(pilot, lambda: app.screen is screen, f"{where}: back to the fleet on Escape")
            elif isinstance(app.focused, Input):  # the filter box: Escape gives the keys back to the table
                await pilot.press("escape")
                await until(pilot, lambda: isinstance(app.focused, DataTable), f"{where}: the table again on Escape")


async def test_a_row_without_a_reachable_url_says_so(loaded):
    """A row Prometheus has no scrape URL for: one line, no screen; one whose URL nothing answers at: one line, and
    its screen opens (its metrics come through Prometheus; sends wait for it). Its text is the targets' own: markup
    in a model name shows as typed."""
    app, screen = fleet_app("http://127.0.0.1:1", live=False)
    async with app.run_test(size=(80, 24)) as pilot:
        async with prometheus_client(Settings(_env_file=None), loaded.prometheus_url) as client:
            fleet = await read_fleet(client)
        first, second, third = fleet.instances
        odd = replace(fleet, instances=(replace(first, url=None), replace(second, url="http://127.0.0.1:1"),
                                        replace(third, model="[bold red]x[/]")))
        screen.post_message(FleetRead(odd, screen.reading, time.monotonic()))
        await until(pilot, lambda: len(table_rows(screen)) == 3, "three rows")
        assert table_rows(screen)[third.key][column_index(screen, "model")] == "[bold red]x[/]"
        said = []
        for row in (0, 1):
            screen.query_one(DataTable).move_cursor(row=row)
            await pilot.press("enter")
            await until(pilot, lambda: len(app._notifications) > len(said), "a line")
            said.append(list(app._notifications)[-1].message)
        await until(pilot, lambda: shows(app, InstanceScreen), "the unreachable one, opened")
        assert said[0] == f"{first.key}: Prometheus lists no scrape URL for it, so there is nothing to open"
        assert said[1] == (f"{second.key}: nothing answers at http://127.0.0.1:1 from here: its metrics come through "
                           "Prometheus, sends wait until it answers")
        assert isinstance(app.screen, InstanceScreen) and app.screen.server_url == "http://127.0.0.1:1"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "the fleet again")


async def test_prometheus_gone_is_one_line_and_the_rows_stay_stale(loaded):
    """Last in the module: it stops the lab."""
    app, screen = fleet_app(loaded.prometheus_url)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: screen.fleet is not None and len(table_rows(screen)) == 3, "three rows")
        before = table_rows(screen)
        loaded.stop()
        await until(pilot, lambda: screen.query_one("#fleet-error").has_class("-shown"), "the error line")
        error = text_of(screen, "#fleet-error")
        assert "\n" not in error and error.startswith("⚠ Prometheus: ") and f"{loaded.prometheus_url}/api/v1/" in error
        assert "stale" in error
        assert table_rows(screen) == before
        assert screen.query_one(DataTable).has_class("-stale")
        assert "STALE" in text_of(screen, "#fleet-title")


def test_closed_port_in_a_real_terminal_is_a_line_not_a_crash(tmp_path):
    """`phasetop --prometheus http://127.0.0.1:1`: the fleet screen opens and says Prometheus does not answer; q exits 0."""
    assert shutil.which("tmux"), "tmux is not installed (make test installs it: scripts/test_tools.sh)"
    socket, exit_file = tmp_path / "tmux.sock", tmp_path / "exit"
    command = (f"XDG_CONFIG_HOME={shlex.quote(str(tmp_path))} {shlex.quote(sys.executable)} -m tui --prometheus "
               f"http://127.0.0.1:1; echo EXIT=$? > {shlex.quote(str(exit_file))}")
    run_sized(socket, tmp_path, command)
    try:
        screen = wait_for(socket, lambda s: "⚠ Prometheus: cannot connect to http://127.0.0.1:1/api/v1/" in s, "the error line", 60)
        assert "Fleet · Prometheus http://127.0.0.1:1" in screen and "Traceback" not in screen
        tmux(socket, "send-keys", "-t", "ui", "q")
        assert exit_line(exit_file, 30) == "EXIT=0"
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True)
