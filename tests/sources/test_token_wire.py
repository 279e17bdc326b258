"""The token stream transport (aiohttp) on real loopback servers: scale, and failures worded as one line.

Each failure here reaches the stream itself (no detection call first), so it is the stream path's
own wording that is checked.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from testbeds.scripted_server import Script
from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.http import make_client
from tui.sources.stream import StreamRequest, measure, warm_up

STREAMS = 256


def _request(max_tokens: int = 8, prompt: str = "[n0nce] the quick brown fox") -> StreamRequest:
    return StreamRequest(api="openai", model="scripted-model", prompt=prompt, max_tokens=max_tokens)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_256_concurrent_streams_against_the_simulator_all_complete_with_their_token_counts():
    with SimulatorProcess.start(["--time-scale", "0.2"]) as sim:
        async with make_client(sim.url, max_connections=STREAMS) as client:
            model = (await client.get("/v1/models")).json()["data"][0]["id"]
            connect_s = await warm_up(client, "/health", STREAMS)
            requests = [StreamRequest("openai", model, f"[n{i}] " + "word " * 40, 16) for i in range(STREAMS)]
            timings = await asyncio.gather(*(measure(client, r, connect_s) for r in requests))
            opened = client.tokens().connections_opened
    assert [t.error for t in timings if not t.ok] == []
    assert {t.output_tokens for t in timings} == {16}, "usage says every stream got all its tokens"
    # Every token came as its own event (a few carry empty text, as vLLM's do mid-UTF-8): all were read.
    assert all(t.token_ends is not None and t.token_ends[-1] == 15 for t in timings)
    assert all(t.ttft_s > 0 and list(t.token_offsets_s) == sorted(t.token_offsets_s) for t in timings)
    assert opened == STREAMS, "the warm-up opened one connection per stream and the streams reused them"
    assert all(t.connect_s == connect_s for t in timings), "no stream opened a connection of its own"


async def test_a_refused_connection_is_one_clear_line():
    async with make_client(f"http://127.0.0.1:{_free_port()}") as client:
        timing = await measure(client, _request())
    assert not timing.ok
    assert "connection refused" in timing.error and "\n" not in timing.error


async def test_a_refused_warm_up_raises_a_source_error():
    from tui.sources.errors import ServerUnavailable

    async with make_client(f"http://127.0.0.1:{_free_port()}") as client:
        with pytest.raises(ServerUnavailable, match="connection refused"):
            await warm_up(client, "/health", 4)


async def test_a_401_on_the_stream_names_the_key_without_showing_it(scripted_server):
    scripted_server.script = Script(api_key="the-right-key")
    async with make_client(scripted_server.url) as client:
        timing = await measure(client, _request())
    assert not timing.ok
    assert "HTTP 401" in timing.error and "API key" in timing.error
    assert "the-right-key" not in timing.error


async def test_a_server_dying_mid_answer_keeps_what_arrived(scripted_server):
    scripted_server.script = Script(fault="cut", fault_after=3, ttft_s=0.01, itl_s=0.005)
    async with make_client(scripted_server.url) as client:
        timing = await measure(client, _request())
    assert not timing.ok
    assert "closed mid-answer" in timing.error
    assert len(timing.token_offsets_s) == 3


async def test_silence_past_the_timeout_is_a_timeout(scripted_server):
    scripted_server.script = Script(fault="silence", fault_after=2, silence_s=3.0, ttft_s=0.01, itl_s=0.005)
    async with make_client(scripted_server.url, timeout_s=0.3) as client:
        timing = await measure(client, _request())
    assert not timing.ok
    assert "no answer within the timeout" in timing.error
    assert len(timing.token_offsets_s) == 2


async def test_the_key_goes_on_the_stream_too(scripted_server):
    from pydantic import SecretStr

    scripted_server.script = Script(api_key="the-right-key")
    async with make_client(scripted_server.url, SecretStr("the-right-key")) as client:
        timing = await measure(client, _request())
    assert timing.ok, timing.error


async def test_tls_to_a_plain_http_server_is_a_tls_error(scripted_server):
    async with make_client(scripted_server.url.replace("http://", "https://")) as client:
        timing = await measure(client, _request())
    assert not timing.ok
    assert "TLS error" in timing.error and "\n" not in timing.error


async def test_a_name_that_does_not_resolve_is_a_dns_failure():
    async with make_client("http://phasetop-test.invalid:8000") as client:
        timing = await measure(client, _request())
    assert not timing.ok
    assert "DNS lookup failed" in timing.error


async def test_a_certificate_that_does_not_verify_is_a_tls_error(tmp_path):
    """A TLS server with a self-signed certificate: verification fails, and says so in one line."""
    import ssl
    import subprocess

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    try:
        async with make_client(f"https://127.0.0.1:{port}") as client:
            timing = await measure(client, _request())
    finally:
        server.close()
    assert not timing.ok
    assert "TLS error" in timing.error and "certificate" in timing.error.lower() and "\n" not in timing.error
