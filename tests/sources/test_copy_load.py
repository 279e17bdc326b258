"""The copy load's parent side against stand-in children that speak the copy child's protocol (no GPU, no torch here)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from tui.sources.workloads.copy_load import CopyLoad, LoadFailed, torch_installed


def stand_in(tmp_path, body: str) -> list[str]:
    script = tmp_path / "child.py"
    script.write_text("import json, os, sys, time\nseconds, mib = float(sys.argv[1]), int(sys.argv[2])\n"
                      + textwrap.dedent(body))
    return [sys.executable, str(script)]


def test_the_childs_own_count_comes_back_on_the_gpu_it_was_given(tmp_path):
    child = stand_in(tmp_path, """
        print("a library's banner", flush=True)
        print(json.dumps({"ready": True, "device": os.environ["CUDA_VISIBLE_DEVICES"], "torch": "2.11.0"}), flush=True)
        time.sleep(seconds)
        print(json.dumps({"bytes_moved": 2 * mib * 2**20 * 100, "seconds": 0.5, "copies": 100}), flush=True)
    """)
    with CopyLoad("GPU-1234", 0.2, 64, command=child) as load:
        run = load.result()
    assert run.device == "GPU-1234" and run.torch_version == "2.11.0" and run.buffer_mib == 64
    assert run.gbs == pytest.approx(2 * 64 * 2**20 * 100 / 0.5 / 1e9)


def test_the_childs_error_line_is_the_failure(tmp_path):
    child = stand_in(tmp_path, """
        print(json.dumps({"error": "CUDA: out of memory"}), flush=True)
        sys.exit(1)
    """)
    with pytest.raises(LoadFailed, match="the copy failed: CUDA: out of memory"), CopyLoad(None, 0.2, 64, command=child):
        pass


def test_a_child_that_dies_says_its_exit_and_last_stderr_line(tmp_path):
    child = stand_in(tmp_path, """
        print(json.dumps({"ready": True, "device": "x"}), flush=True)
        print("RuntimeError: CUDA error: an illegal memory access", file=sys.stderr, flush=True)
        os._exit(3)
    """)
    with CopyLoad(None, 0.2, 64, command=child) as load, pytest.raises(LoadFailed) as failed:
        load.result()
    assert "exit 3" in str(failed.value) and "illegal memory access" in str(failed.value)


def test_the_real_child_on_a_machine_without_a_gpu_says_why():
    """No torch here (or one without CUDA): the real child's one line names which (on a GPU host it copies)."""
    expected = "sees no CUDA device" if torch_installed() else "torch is not importable"
    with pytest.raises(LoadFailed, match=expected), CopyLoad(None, 0.2, 64):
        pass


def test_nonsense_from_the_child_is_refused(tmp_path):
    child = stand_in(tmp_path, """
        print(json.dumps({"ready": True, "device": "x"}), flush=True)
        print(json.dumps({"bytes_moved": "lots", "seconds": 1}), flush=True)
    """)
    with CopyLoad(None, 0.2, 64, command=child) as load, pytest.raises(LoadFailed, match="nonsense"):
        load.result()
