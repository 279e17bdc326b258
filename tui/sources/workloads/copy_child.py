"""A plain device-to-device copy on one GPU, the GPU check's known load: `python -m tui.sources.workloads.copy_child SECONDS MIB`.

Its own process, so its CUDA context and its loop never hold up the NVML sampler. It prints one JSON line once
warm, `{"ready": true, "device": NAME, "torch": VERSION}`, copies one MIB buffer into another for SECONDS, then
prints `{"bytes_moved": N, "seconds": S, "copies": K}`: each copy reads MIB and writes MIB, so N = 2 × MIB × K.
Any failure is one line `{"error": "..."}` and exit 1. Needs torch built with CUDA; imports nothing of phasetop.
"""

from __future__ import annotations

import json
import sys
import time

WARM_COPIES = 5
COPIES_PER_SYNC = 10
"""Copies queued between synchronisations: the GPU never waits for the host, and the clock stops within one batch."""


def _say(document: dict) -> None:
    print(json.dumps(document), flush=True)


def _fail(message: str) -> int:
    _say({"error": message})
    return 1


def main(argv: list[str]) -> int:
    seconds, mib = float(argv[0]), int(argv[1])
    try:
        import torch
    except ImportError as error:
        return _fail(f"torch is not importable: {error}")
    if not torch.cuda.is_available():
        return _fail(f"torch {torch.__version__} sees no CUDA device")
    size = mib * 2**20
    try:
        source = torch.empty(size, dtype=torch.uint8, device="cuda")
        target = torch.empty_like(source)
        source.fill_(1)
        for _ in range(WARM_COPIES):
            target.copy_(source)
        torch.cuda.synchronize()
    except (RuntimeError, torch.cuda.OutOfMemoryError) as error:
        return _fail(f"CUDA: {str(error).splitlines()[0]}")
    _say({"ready": True, "device": torch.cuda.get_device_name(), "torch": torch.__version__})
    copies = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in range(COPIES_PER_SYNC):
            target.copy_(source)
        torch.cuda.synchronize()
        copies += COPIES_PER_SYNC
    elapsed = time.perf_counter() - started
    _say({"bytes_moved": 2 * size * copies, "seconds": elapsed, "copies": copies})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
