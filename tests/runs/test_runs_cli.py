"""Runs end to end against real servers: probe saves, `runs` lists, `compare` names the flag that changed."""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

import pytest

from testbeds.scripted_server import Script, ScriptedServer
from tui.cli.main import main
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.detect import describe_server
from tui.sources.http import make_client
from tui.sources.identity import server_identity

SECRET = "sk-run-file-must-not-hold-this-51c2"


@pytest.fixture
def runs_dir(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no user config file
    monkeypatch.delenv("PHASETOP_API_KEY", raising=False)
    monkeypatch.setenv("PHASETOP_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs"


@pytest.fixture(scope="module")
def sim():
    with SimulatorProcess.start() as process:
        yield process


def phasetop(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def saved_id(err: str) -> str:
    match = re.fullmatch(r"saved run (\S+)\n", err)
    assert match, err
    return match.group(1)


def probe(capsys, url: str, *extra: str) -> str:
    code, out, err = phasetop(capsys, "probe", "--url", url, "--prompt-tokens", "300", "--max-tokens", "8", "--repeat", "2", "--json", *extra)
    assert code == 0, err
    json.loads(out)  # stdout is still the probe's one document
    return saved_id(err)


def timed_probe(capsys, url: str, runs_dir) -> str:
    """A probe with a request timed as generation: on a loaded box each of a probe's two requests may come in clumps
    (flagged, so no figures to compare), so probe again, up to three times, the flagged run's file removed."""
    for _ in range(3):
        run = probe(capsys, url)
        path = runs_dir / f"{run}.json"
        if any(r["ok"] and not r["burst"] for r in json.loads(path.read_text())["requests"]):
            return run
        path.unlink()
    raise AssertionError("three probes with every request flagged as delivery, not generation")


async def test_identity_of_the_simulator(sim):
    async with make_client(sim.url) as client:
        info = await describe_server(client, "openai", None)
        identity = await server_identity(client, info)
    assert identity["url"] == sim.url and identity["kind"] == "openai"
    assert identity["model"] == info.model and identity["version"] == "0.33.0"
    assert identity["max_model_len"] == info.max_model_len > 0
    assert identity["simulator_flags"]["max_num_batched_tokens"].isdigit()
    assert identity["simulator_flags"]["gpu"] == "NVIDIA H100 SXM"
    assert identity["engine_config"]["block_size"] == "16"  # from vllm:cache_config_info
    assert identity["process_start_time"] > 1.6e9


@pytest.mark.parametrize("kind", ["openai", "ollama"])
async def test_identity_without_metrics_or_version_is_nulls(kind):
    server = ScriptedServer(Script(kind=kind)).start()
    try:
        async with make_client(server.url) as client:
            info = await describe_server(client, kind, None)
            identity = await server_identity(client, info)
    finally:
        server.stop()
    assert identity["model"] == "scripted-model"
    assert identity["engine_config"] is None and identity["process_start_time"] is None
    assert identity["simulator_flags"] is None
    assert identity["version"] == ("0.33.0" if kind == "openai" else "0.9.0")


def test_probe_saves_and_runs_lists_it(sim, runs_dir, capsys):
    run_id = probe(capsys, sim.url)
    assert re.fullmatch(r"\d{8}-\d{6}-probe-[0-9a-f]{4}", run_id)
    saved = json.loads((runs_dir / f"{run_id}.json").read_text())
    assert saved["kind"] == "probe" and saved["params"]["prompt_tokens"] == 300 and saved["params"]["repeat"] == 2
    assert [r["ok"] for r in saved["requests"]] == [True, True]
    # Both count, but for one a loaded box delivered in a clump (kept, marked, out of the summary: said, not hidden).
    assert saved["result"]["ttft_s"]["n"] + saved["result"]["bursts_excluded"] == 2
    assert saved["server"]["simulator_flags"]["gpu"] == "NVIDIA H100 SXM"

    code, out, err = phasetop(capsys, "runs", "--json")
    assert code == 0 and err == ""
    [header] = json.loads(out)
    assert header["id"] == run_id and header["kind"] == "probe"
    assert header["server"]["url"] == sim.url and header["started"] == saved["started"]

    code, out, _ = phasetop(capsys, "runs")
    assert code == 0
    assert run_id in out and sim.url in out and ("2 requests, TTFT p50" in out or "timed delivery, not generation" in out)

    code, _, err = phasetop(capsys, "probe", "--url", sim.url, "--max-tokens", "2", "--no-save")
    assert code == 0 and err == ""
    assert len(list(runs_dir.glob("*.json"))) == 1


def test_runs_dir_flag_and_empty_listing(sim, runs_dir, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    code, out, _ = phasetop(capsys, "runs", "--runs-dir", str(elsewhere))
    assert code == 0 and out == f"no saved runs in {elsewhere}\n"
    run_id = probe(capsys, sim.url, "--runs-dir", str(elsewhere))
    assert (elsewhere / f"{run_id}.json").is_file() and not runs_dir.exists()
    code, out, _ = phasetop(capsys, "runs", "--json", "--runs-dir", str(elsewhere))
    assert [h["id"] for h in json.loads(out)] == [run_id]


def test_an_unwritable_runs_dir_is_one_line_and_the_output_stands(sim, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, out, err = phasetop(capsys, "probe", "--url", sim.url, "--max-tokens", "2", "--json", "--runs-dir", str(blocker))
    assert code == 0
    assert json.loads(out)["requests"][0]["ok"] is True
    assert err.startswith("run not saved: ") and err.count("\n") == 1


@pytest.mark.parametrize("ref", ["2099", "", "nothing/here.json"])
def test_compare_unknown_run_is_a_clear_usage_error(runs_dir, capsys, ref):
    code, out, err = phasetop(capsys, "compare", ref, "2098", "--json")
    assert code == 2 and out == ""
    assert err.startswith("phasetop compare: no run") and err.count("\n") == 1 and "Traceback" not in err


def test_run_file_never_holds_the_api_key(runs_dir, monkeypatch, capsys):
    with SimulatorProcess.start(["--api-key", SECRET]) as guarded:
        code, _, err = phasetop(capsys, "probe", "--url", guarded.url, "--max-tokens", "4")
        assert code == 1 and "API key is missing or wrong" in err  # the key really guards this server
        monkeypatch.setenv("PHASETOP_API_KEY", SECRET)
        run_id = probe(capsys, guarded.url)
    files = list(runs_dir.iterdir())
    assert [f.name for f in files] == [f"{run_id}.json"]
    text = files[0].read_text()
    assert json.loads(text)["server"]["simulator_flags"]["gpu"] == "NVIDIA H100 SXM"  # identity was read with the key
    assert SECRET not in text and SECRET[3:20] not in text


def test_restart_with_another_batch_budget_shows_in_compare(runs_dir, capsys):
    """Probe, restart the simulator on the same port with another --max-num-batched-tokens, probe, compare."""
    with SimulatorProcess.start(["--max-num-batched-tokens", "2048"]) as first:
        url = first.url
        before = timed_probe(capsys, url, runs_dir)
    port = str(urlsplit(url).port)
    with SimulatorProcess.start(["--max-num-batched-tokens", "256", "--port", port]) as second:
        assert second.url == url
        after = timed_probe(capsys, url, runs_dir)

    code, out, err = phasetop(capsys, "compare", before[:-2], after, "--json")
    assert code == 0 and err == ""
    comparison = json.loads(out)
    assert comparison["before"]["id"] == before and comparison["after"]["id"] == after
    assert comparison["restarted"] is True
    assert {"key": "max_num_batched_tokens", "before": "2048", "after": "256", "source": "simulator_flags"} in comparison["config_diff"]
    assert comparison["params_diff"] == []
    for stat in ("p50", "p99"):
        ttft = next(f for f in comparison["figures"] if (f["figure"], f["stat"]) == ("ttft_s", stat))
        assert ttft["before"] > 0 and ttft["after"] > 0
        assert ttft["delta"] == pytest.approx(ttft["after"] - ttft["before"])

    code, out, _ = phasetop(capsys, "compare", str(runs_dir / f"{before}.json"), after)
    assert code == 0
    assert re.search(r"max_num_batched_tokens\s+2048 → 256", out)
    assert re.search(r"TTFT p50\s+[\d.,]+ ms\s+[\d.,]+ ms\s+[+-][\d.,]+ ms", out)
    assert out.index("server config changed") < out.index("TTFT p50")  # what changed comes first


def test_runs_of_different_workloads_are_refused_unless_forced_and_then_said_first(sim, runs_dir, capsys):
    short, long = probe(capsys, sim.url), probe(capsys, sim.url, "--prompt-tokens", "2000")
    code, out, err = phasetop(capsys, "compare", short, long)
    assert code == 2 and out == ""
    assert "different workloads (prompt_tokens 300 → 2000)" in err and "--force" in err and len(err.strip().splitlines()) == 1
    code, out, err = phasetop(capsys, "compare", short, long, "--force")
    assert code == 0, err
    assert out.splitlines()[0].startswith("the workloads differ: prompt_tokens 300 → 2000")
    assert "TTFT p50" in out
