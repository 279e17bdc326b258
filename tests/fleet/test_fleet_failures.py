"""`phasetop fleet` when Prometheus is not there or answers badly: one line on stderr, a non-zero exit, no secret shown."""

import pytest

from testbeds.scripted_server import Reply, Script, ScriptedServer
from tests.hostile import phasetop
from tests.loopback import closed_port_url

TOKEN = "prom-token-5f3a9c1e7d"
API_PATHS = ("/api/v1/series", "/api/v1/targets")


def answering(reply: Reply) -> ScriptedServer:
    return ScriptedServer(Script(replies={path: reply for path in API_PATHS})).start()


def failed_line(tmp_path, url: str, *args: str, env: dict | None = None) -> str:
    done = phasetop(tmp_path, "fleet", "--prometheus", url, *args, env=env)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_unreachable(tmp_path):
    url = closed_port_url()
    line = failed_line(tmp_path, url, "--json")
    assert line in (f"phasetop fleet: Prometheus: cannot connect to {url}/api/v1/{path}: connection refused"
                    for path in ("series", "targets"))


@pytest.mark.parametrize(("reply", "says"), [
    (Reply(b"upstream unavailable", status=503, content_type="text/plain"), "HTTP 503: upstream unavailable"),
    (Reply(b"<html><body>login</body></html>", content_type="text/html"), "not a Prometheus API answer (it begins '<html><body>login</body></html>')"),
    (Reply({"status": "success"}), """not a Prometheus API answer (it begins '{"status": "success"}')"""),
    (Reply(b"", status=200), "not a Prometheus API answer (it begins 'an empty body')"),
    (Reply({"status": "error", "errorType": "bad_data", "error": "parse error at char 3:\nunexpected"}, status=400),
     "bad_data: parse error at char 3: unexpected"),
    (Reply({"status": "error", "errorType": "timeout", "error": "query timed out"}, status=503), "timeout: query timed out"),
])
def test_bad_answers_are_one_clear_line(tmp_path, reply, says):
    server = answering(reply)
    try:
        line = failed_line(tmp_path, server.url)
    finally:
        server.stop()
    assert line.startswith(f"phasetop fleet: Prometheus: {server.url}/api/v1/")
    assert line.endswith(says)


def test_401_names_the_settings_and_never_the_token(tmp_path):
    server = answering(Reply(b"bad token {auth}", status=401, content_type="text/plain"))
    try:
        line = failed_line(tmp_path, server.url, env={"PHASETOP_PROMETHEUS__BEARER_TOKEN": TOKEN})
    finally:
        server.stop()
    assert "HTTP 401, the credentials are missing or wrong" in line and "prometheus.bearer_token" in line
    assert TOKEN not in line


def test_the_bearer_token_and_basic_auth_go_in_the_header_and_stay_out_of_output(tmp_path):
    echo = Reply(b"you sent {auth}", status=502, content_type="text/plain")
    server = answering(echo)
    try:
        bearer = failed_line(tmp_path, server.url, env={"PHASETOP_PROMETHEUS__BEARER_TOKEN": TOKEN})
        basic = failed_line(tmp_path, server.url, env={"PHASETOP_PROMETHEUS__USERNAME": "grafana",
                                                       "PHASETOP_PROMETHEUS__PASSWORD": "s3cret-pass-77"})
    finally:
        server.stop()
    # The server echoed what it got: the header was sent, and the output shows it redacted.
    assert "you sent Bearer ***" in bearer and TOKEN not in bearer
    assert "you sent Basic ***" in basic and "Z3JhZmFuYTpzM2NyZXQtcGFzcy03Nw==" not in basic


def test_no_url_and_bad_filters_are_usage_errors(tmp_path):
    done = phasetop(tmp_path, "fleet")
    assert (done.returncode, done.stderr.strip()) == (2, "phasetop fleet: no Prometheus URL: give --prometheus URL or set prometheus.url")
    done = phasetop(tmp_path, "fleet", "--prometheus", "http://127.0.0.1:9", "--label-filter", "9bad=x")
    assert done.returncode == 2 and "is not a label name" in done.stderr
    done = phasetop(tmp_path, "fleet", "--prometheus", "ftp://x")
    assert done.returncode == 2 and done.stderr.startswith("phasetop fleet: bad settings: --prometheus: bad URL")
