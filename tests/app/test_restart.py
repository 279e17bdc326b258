"""The server restarts with new flags under the open UI: down, then up again with the new config and fresh counters."""

from dataclasses import replace

from textual.widgets import Sparkline, Static

from tests.app.harness import completed, settings, wait_for
from tests.loopback import free_port
from tui.app.app import PhasetopApp
from tui.app.messages import MetricsScraped, ServerCameUp, ServerWentDown
from tui.app.screens.main import MainScreen
from tui.core.telemetry.readings import Restart
from tui.sources.servers.simulator_server import SimulatorProcess

RATES = ("prompt_tok_s", "generation_tok_s", "preemptions_per_s")


def unique(seen, kind):
    return list({id(m): m for m in seen if isinstance(m, kind)}.values())


async def test_restart_with_new_flags_reads_the_new_config_and_counts_from_zero():
    port = free_port()
    seen = []
    first = SimulatorProcess.start(["--port", str(port)])
    second = None
    app = PhasetopApp(settings(poll={"metrics_interval_s": 0.2}), first.url, None, None)
    try:
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            screen = app.screen
            assert isinstance(screen, MainScreen)
            await wait_for(pilot, lambda: screen.server.kind == "openai" and screen.server.config, 60)
            assert "enable_prefix_caching=True" in screen.server.config

            # Traffic on the first server, so its counters stand well above zero when it goes.
            await pilot.press("1")
            await wait_for(pilot, lambda: len(completed(seen)) == 1, 60)
            await wait_for(pilot, lambda: (screen.metrics.generation_tokens_total or 0) >= 128, 60)
            before = screen.metrics

            first.stop()
            await wait_for(pilot, lambda: screen.server.down_since is not None, 60)
            status = screen.query_one("#status", Static)
            assert "DOWN since" in str(status.render())
            assert all(pane.has_class("-down") for pane in screen.query(".pane"))

            second = SimulatorProcess.start(["--port", str(port), "--no-enable-prefix-caching",
                                             "--max-num-batched-tokens", "512"])
            assert second.url == first.url
            await wait_for(pilot, lambda: screen.server.down_since is None
                           and "enable_prefix_caching=False" in (screen.server.config or ""), 90)
            await wait_for(pilot, lambda: len(unique(seen, ServerCameUp)) == 2, 60)
            await pilot.pause(0.5)  # a few more scrapes of the new server

            text = str(status.render())
            assert f"openai {first.url} · up" in text and "enable_prefix_caching=False" in text and "DOWN" not in text
            assert not any(pane.has_class("-down") for pane in screen.query(".pane"))

            snapshots = [m.snapshot for m in unique(seen, MetricsScraped)]
            restarts = [s for s in snapshots if s.restart is not None]
            assert len(restarts) == 1, "exactly one restart, on the first scrape of the new server"
            [after] = restarts
            assert after.restart.config_changes["enable_prefix_caching"] == ("True", "False")
            # Counters read as new: the new server's totals, and rates from zero, never old minus new.
            assert after.generation_tokens_total == 0 < before.generation_tokens_total
            assert after.generation_tok_s == 0 and after.prompt_tok_s == 0
            for snapshot in snapshots:
                assert all(getattr(snapshot, r) is None or getattr(snapshot, r) >= 0 for r in RATES), snapshot
                assert all(q.n >= 0 for q in snapshot.histograms.values())
            for spark in screen.query("#metrics-pane Sparkline").results(Sparkline):
                assert all(value >= 0 for value in spark.data or [])
            extra = str(screen.query_one("#metrics-extra", Static).render())
            assert "decode 0 tok/s" in extra and "-" not in extra.replace("prefix-cache", "")

            # The UI talks to the new server: a request goes through and is counted there from zero.
            await pilot.press("1")
            await wait_for(pilot, lambda: len(completed(seen)) == 2, 60)
            assert completed(seen)[-1].timing.ok
            await wait_for(pilot, lambda: screen.metrics.generation_tokens_total == 128, 60)
            assert not any(isinstance(m, ServerWentDown) and m.since > after.t_unix for m in seen)
    finally:
        first.stop()
        if second is not None:
            second.stop()


async def test_a_restart_between_two_scrapes_is_noticed_without_a_down():
    """llama.cpp restarts in a second: the app may never see it down, only new counters and config."""
    port = free_port()
    seen = []
    first = SimulatorProcess.start(["--port", str(port)])
    second = None
    # Scrapes 8 s apart, and the restart right after one: no scrape falls while nothing listens.
    app = PhasetopApp(settings(poll={"metrics_interval_s": 8.0}), first.url, None, None)
    try:
        async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
            screen = app.screen
            await wait_for(pilot, lambda: screen.server.kind == "openai" and screen.server.config, 60)
            scrapes = len(unique(seen, MetricsScraped))
            first.stop()
            second = SimulatorProcess.start(["--port", str(port), "--no-enable-prefix-caching"])
            await wait_for(pilot, lambda: len(unique(seen, MetricsScraped)) > scrapes, 60)
            assert not unique(seen, ServerWentDown), "the restart took longer than a scrape interval"
            assert screen.metrics.restart is not None
            await wait_for(pilot, lambda: len(unique(seen, ServerCameUp)) == 2, 30)
            assert "enable_prefix_caching=False" in str(screen.query_one("#status", Static).render())
    finally:
        first.stop()
        if second is not None:
            second.stop()


async def test_a_restart_read_before_phasetop_restarted_the_server_opens_no_second_session(sim_url):
    """A scrape that found the restart phasetop itself made, read before the restart was told to the scraper and
    handled after it: its restart is the one already counted (a second session, never identified, made before →
    after compare nothing)."""
    seen = []
    app = PhasetopApp(settings(), sim_url, None, None)
    async with app.run_test(size=(120, 40), message_hook=seen.append) as pilot:
        screen: MainScreen = app.screen
        await wait_for(pilot, lambda: screen.metrics is not None and screen.state.lab.sessions.current is not None)
        found = replace(screen.metrics, restart=Restart(("process_start_time_seconds changed",), {}, {}))
        read_in = screen.scraper.generation
        screen.scraper.forget()  # phasetop restarted the server (its NewSession effect tells the scraper)
        screen.post_message(MetricsScraped(found, read_in))
        await pilot.pause(0.3)
        assert [s.number for s in screen.state.lab.sessions.sessions] == [1], "the stale restart opened no session"
        screen.post_message(MetricsScraped(found, screen.scraper.generation))
        await wait_for(pilot, lambda: len(screen.state.lab.sessions.sessions) == 2, what="a restart read now opens one")
