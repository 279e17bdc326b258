"""Every failure is one line: an answer that is not HTTP (a bad status line, garbage where a chunk size goes),
a bad --url (repeated as typed, with http:// suggested where the scheme is missing), and a server that is not
there (named by its URL, not by the first path auto-detection asked)."""

from __future__ import annotations

import pytest

from tests.loopback import closed_port_url
from tests.sources.raw_answers import BAD_STATUS_LINE, GARBAGE_CHUNK, ONE_TOKEN, SSE_HEAD, raw_generation, raw_server
from tests.cli.running import run

pytestmark = pytest.mark.usefixtures("isolated")

PROBE = ["probe", "--prompt-tokens", "10", "--max-tokens", "4", "--no-save"]
BENCH = ["bench", "--num-prompts", "2", "--prompt-tokens", "10", "--max-tokens", "4", "--no-save"]


def failure_line(command: str, err: str) -> str:
    """The one failure line on stderr; bench's progress lines ("bench: 2/2 done, …") may stand beside it."""
    lines = [line for line in err.strip().splitlines() if not line.startswith(f"{command}: ")]
    assert len(lines) == 1 and lines[0].startswith(f"phasetop {command}: "), err
    assert "internal error" not in err and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("argv", [PROBE, BENCH], ids=["probe", "bench"])
def test_a_bad_status_line_is_a_one_line_failure(capsys, argv):
    """It was five lines: "not an HTTP answer (Bad status line:", "Invalid status code:", a blank, the bytes,
    a caret."""
    with raw_generation([BAD_STATUS_LINE]) as server:
        code, out, err = run(capsys, *argv, "--url", server.url)
    assert code == 1
    line = failure_line(argv[0], err)
    assert line.endswith(f"{server.url}/v1/completions: not an HTTP answer "
                         "(Bad status line: Invalid status code: b'HTTP/1.1 abc OK')"), line
    assert not any(row.strip() in ("^", "b'HTTP/1.1 abc OK'", "Invalid status code:") for row in out.splitlines()), out


def test_a_bad_status_line_at_detection_is_a_one_line_failure(capsys):
    with raw_server(BAD_STATUS_LINE) as url:
        code, _, err = run(capsys, *PROBE, "--url", url)
    assert code == 1
    assert "not an HTTP answer" in failure_line("probe", err)


@pytest.mark.parametrize("argv", [PROBE, BENCH], ids=["probe", "bench"])
def test_garbage_in_a_stream_is_a_one_line_failure_and_no_hang(capsys, argv):
    """Garbage read apart from the head left the stream waiting for ever (aiohttp's parser kept its error)."""
    with raw_generation([SSE_HEAD + ONE_TOKEN, GARBAGE_CHUNK], gap_s=0.2) as server:
        code, _, err = run(capsys, *argv, "--url", server.url, "--timeout", "20")
    assert code == 1
    line = failure_line(argv[0], err)
    assert f"{server.url}/v1/completions: not valid HTTP mid-answer (Invalid character in chunk size: b'zz')" in line, line


@pytest.mark.parametrize(("url", "expected"), [
    ("localhost:8000", "bad URL 'localhost:8000': no scheme; did you mean http://localhost:8000?"),
    ("ht!tp://x", "bad URL 'ht!tp://x': the scheme 'ht!tp' is not http or https; did you mean http://x?"),
    ("ftp://127.0.0.1:21", "bad URL 'ftp://127.0.0.1:21': the scheme 'ftp' is not http or https; did you mean http://127.0.0.1:21?"),
    ("http://:8000", "bad URL 'http://:8000': no host; give http://HOST:PORT or https://HOST:PORT"),
    ("localhost:99999", "bad URL 'localhost:99999': no scheme, and port out of range 1–65535; give http://HOST:PORT or https://HOST:PORT"),
    ("me:hunter2@127.0.0.1:8000", "bad URL '127.0.0.1:8000': no scheme; did you mean http://127.0.0.1:8000?"),
])
def test_a_bad_url_is_repeated_with_what_to_type(capsys, url, expected):
    code, out, err = run(capsys, "probe", "--url", url)
    assert (code, out) == (2, "")
    assert err.strip() == f"phasetop probe: {expected}"


@pytest.mark.parametrize("command", [PROBE, BENCH], ids=["probe", "bench"])
def test_nothing_answering_names_the_server_not_ollamas_path(capsys, command):
    """It was "cannot connect to URL/api/version": Ollama's path, to a vLLM user, from the first probe of --api auto."""
    url = closed_port_url()
    code, _, err = run(capsys, *command, "--url", url)
    assert code == 1
    assert failure_line(command[0], err) == (f"phasetop {command[0]}: cannot connect to {url}: connection refused; "
                                             "nothing answered there, so no API could be detected")


def test_api_ollama_may_name_ollamas_path(capsys):
    url = closed_port_url()
    code, _, err = run(capsys, *PROBE, "--url", url, "--api", "ollama")
    assert code == 1
    assert failure_line("probe", err) == f"phasetop probe: cannot connect to {url}/api/version: connection refused"
