"""A scripted loopback server per test."""

from __future__ import annotations

import pytest

from testbeds.scripted_server import ScriptedServer


@pytest.fixture
def scripted_server():
    server = ScriptedServer().start()
    yield server
    server.stop()
