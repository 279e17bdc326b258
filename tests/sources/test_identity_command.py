"""A local server's identity carries the flags of its command line, never a credential."""

from __future__ import annotations

from pydantic import SecretStr

from tui.sources.servers.simulator_server import SimulatorProcess
from tui.sources.detect import describe_server
from tui.sources.http import make_client
from tui.sources.identity import local_command_flags, server_identity

SECRET = "sk-never-saved-91c2"


async def test_the_simulators_own_flags_are_read_from_its_command_line_without_its_key():
    with SimulatorProcess.start(["--max-num-batched-tokens", "512", "--max-num-seqs", "64", "--api-key", SECRET]) as sim:
        async with make_client(sim.url, SecretStr(SECRET)) as client:
            identity = await server_identity(client, await describe_server(client, "openai", None))
    flags = identity["command_flags"]
    assert flags["max_num_batched_tokens"] == "512" and flags["max_num_seqs"] == "64"
    assert "api_key" not in flags and SECRET not in str(identity)


def test_a_remote_server_has_no_command_line_here():
    assert local_command_flags("http://inference.example:8000") is None
