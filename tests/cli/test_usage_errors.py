"""Usage errors are one line and a hint, exit 2; flags before a subcommand are the subcommand's; a file bench
would write at its end is checked before it starts; `--api ollama` at a server that is not Ollama says so."""

from __future__ import annotations

import pytest

from tests.loopback import closed_port_url
from tui.cli.gpu import format_sample
from tui.cli.main import main
from tui.core.telemetry.readings import GpuReading, GpuSample, HostSample, ProcessSample
from tui.sources.servers.simulator_server import SimulatorProcess

pytestmark = pytest.mark.usefixtures("isolated")


def run(capsys, *argv: str) -> tuple[int, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's own errors exit
        code = exit_.code
    out, err = capsys.readouterr()
    return code, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and "usage:" not in err, err
    return lines[0]


@pytest.mark.parametrize(("argv", "expected"), [
    (["prob"], "phasetop: unknown command 'prob' (did you mean probe?); phasetop --help lists them"),
    (["metircs"], "phasetop: unknown command 'metircs' (did you mean metrics?); phasetop --help lists them"),
    (["probe", "--urll", "x"], "phasetop probe: unknown option '--urll' (did you mean --url?); phasetop probe --help lists the options"),
    (["probe", "--config", "c.toml"],
     "phasetop probe: unknown option '--config' (it goes before the command: phasetop --config FILE probe); "
     "phasetop probe --help lists the options"),
    (["probe", "stray"], "phasetop probe: unexpected argument 'stray'; phasetop probe --help lists the options"),
    (["bench"], "phasetop bench: the following arguments are required: --num-prompts; phasetop bench --help lists the options"),
    (["bench", "--num-prompts", "x"], "phasetop bench: argument --num-prompts: invalid int value: 'x'; phasetop bench --help lists the options"),
    (["sim", "--port", "70000"], "phasetop sim: argument --port: 70000 is out of range (0–65535; 0 picks a free port); phasetop sim --help lists the options"),
])
def test_a_usage_error_is_one_line_with_a_hint(capsys, argv, expected):
    code, err = run(capsys, *argv)
    assert code == 2
    assert one_line(err) == expected


def test_a_flag_before_the_subcommand_is_the_subcommands(capsys):
    """`phasetop --url X probe` used X's default instead, silently."""
    code, err = run(capsys, "--url", "http://127.0.0.1:99999", "probe")
    assert code == 2 and "bad URL" in one_line(err)
    code, err = run(capsys, "--timeout", "0", "probe", "--url", closed_port_url())
    assert code == 2 and one_line(err).startswith("phasetop probe: bad settings: --timeout:")
    url = closed_port_url()
    code, err = run(capsys, "--api", "openai", "probe", "--url", url)  # openai asks /version, auto /api/version first
    assert code == 1 and one_line(err) == f"phasetop probe: cannot connect to {url}/version: connection refused"


def test_a_flag_before_a_subcommand_that_lacks_it_is_refused(capsys):
    code, err = run(capsys, "--bandwidth-gbs", "5", "probe", "--url", closed_port_url())
    assert code == 2 and "unknown option '--bandwidth-gbs'" in one_line(err)


def test_bench_save_into_a_missing_directory_fails_before_the_bench(capsys, tmp_path):
    """Nothing listens at the URL: refusing the file first shows nothing was tried."""
    target = tmp_path / "no" / "such" / "x.json"
    code, err = run(capsys, "bench", "--url", closed_port_url(), "--num-prompts", "1", "--save", str(target))
    assert code == 2 and one_line(err) == f"phasetop bench: --save {target}: no such directory {target.parent}"
    code, err = run(capsys, "bench", "--url", closed_port_url(), "--num-prompts", "1", "--save", str(tmp_path))
    assert code == 2 and "is a directory" in one_line(err)


def test_api_ollama_at_a_vllm_server_says_it_did_not_answer_as_ollama(capsys):
    with SimulatorProcess.start() as sim:
        code, err = run(capsys, "probe", "--url", sim.url, "--api", "ollama", "--no-save")
    assert code == 1
    assert one_line(err) == f"phasetop probe: {sim.url}: the server did not answer as Ollama (/api/version); try --api auto"


def test_memory_is_in_gib_as_the_ui_shows_it():
    gib = 1024**3
    gpu = GpuReading(index="0", name="H100", mem_used_bytes=40 * gib, mem_total_bytes=80 * gib, server_mem_bytes=gib)
    host = HostSample(cpu_percent=5, cpu_count=2, ram_used_bytes=3 * gib, ram_total_bytes=16 * gib, ram_available_bytes=13 * gib,
                      process=ProcessSample(pid=1, name="vllm", cpu_percent=1, rss_bytes=gib // 2, num_threads=4))
    text = format_sample(GpuSample(t_unix=0, devices=(gpu,)), host)
    assert "mem 40.0 GiB / 80.0 GiB" in text and "server 1.0 GiB" in text
    assert "RAM 3.0 GiB / 16.0 GiB" in text and "RSS 0.5 GiB" in text
    assert " GB " not in text.replace("GB/s", "")
