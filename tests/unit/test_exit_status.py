"""How a server that gave up is said: its reason line, not the usage hint after it."""

from tui.core.serving.exit_status import exit_status, reason_line

LLAMA_REFUSED = """error while handling argument "--parallel": stoi

usage:
-np,   --parallel N                     number of server slots (default: -1, -1 = auto)
                                        (env: LLAMA_ARG_N_PARALLEL)


to show complete usage, run with -h
"""
"""What llama-server wrote on `--parallel bogus` before it exited with status 1."""


def test_llama_servers_error_is_the_reason_not_its_usage_hint():
    assert reason_line(LLAMA_REFUSED) == 'error while handling argument "--parallel": stoi'


def test_python_and_argparse_errors_are_found_and_the_last_wins():
    tail = "loading weights\nValueError: max_num_batched_tokens must be positive\nRuntimeError: Engine core initialization failed"
    assert reason_line(tail) == "RuntimeError: Engine core initialization failed"
    assert reason_line("usage: sim [-h]\nsim: error: argument --port: invalid int value: 'x'") == \
        "sim: error: argument --port: invalid int value: 'x'"


def test_without_an_error_line_the_last_line_is_the_reason():
    assert reason_line("starting\nlistening on 127.0.0.1:8000\n\n") == "listening on 127.0.0.1:8000"
    assert reason_line("") == "" and reason_line("\n \n") == ""


def test_an_exit_is_said_by_status_or_signal():
    assert exit_status(1) == "exit status 1" and exit_status(-9) == "killed by SIGKILL"
