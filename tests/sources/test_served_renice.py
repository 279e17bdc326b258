"""`--serve … --renice`: once the command is healthy (and after each restart), every thread of vLLM's engine and
worker processes under it runs at nice 19, and nothing else of it does (its API server keeps its priority)."""

from __future__ import annotations

import os
import sys

from tests.loopback import closed_port_url
from tests.sources.engine_threads import engine_threads
from tui.core.serving.serve_command import ServeCommand, Setting
from tui.sources.servers.served_command import ServedCommand, start_served

# A stand-in for vLLM's process tree: an "API server" answering /health, with a child named as vLLM names its
# engine (`VLLM::EngineCore`), which runs a second thread so every thread must be reniced, not the first only.
# The server is healthy once its engine says its thread runs, as vLLM's is once its engine is up.
FAKE_VLLM = """
import http.server, subprocess, sys
engine = "import threading, time; threading.Thread(target=time.sleep, args=(120,)).start(); print(flush=True); time.sleep(120)"
subprocess.Popen([sys.executable, "-c", engine, "VLLM::EngineCore"], stdout=subprocess.PIPE).stdout.readline()
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[sys.argv.index("--port") + 1])), Health).serve_forever()
"""


def test_renice_puts_the_engines_threads_at_19_on_start_and_after_a_restart():
    port = int(closed_port_url().rsplit(":", 1)[1])
    command = ServeCommand.parse([sys.executable, "-c", FAKE_VLLM, "--port", str(port), "--max-num-seqs", "8"])
    served = ServedCommand(command, command.url, start_served(command, 30, renice=True), 30, renice=True)
    try:
        first = engine_threads(served.pid)
        assert len(first) == 2 and set(first) == {19}, first
        assert os.getpriority(os.PRIO_PROCESS, served.pid) == os.getpriority(os.PRIO_PROCESS, 0), "the API server keeps its own"
        served.restart(command.with_setting(Setting("max-num-seqs", "4")))
        again = engine_threads(served.pid)
        assert len(again) == 2 and set(again) == {19}, again
    finally:
        served.stop()


def test_without_renice_the_engine_keeps_its_priority():
    port = int(closed_port_url().rsplit(":", 1)[1])
    command = ServeCommand.parse([sys.executable, "-c", FAKE_VLLM, "--port", str(port)])
    server = start_served(command, 30)
    try:
        assert set(engine_threads(server.pid)) == {os.getpriority(os.PRIO_PROCESS, 0)}
    finally:
        server.stop()
