#!/usr/bin/env python3
"""`make gpu-check`: phasetop's GPU check (tui.cli.gpu_check), runnable from a checkout with no install.

On a bare GPU host (nvidia-ml-py, psutil and torch, no phasetop): `python3 scripts/gpu_check.py [--json]`.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    from tui.cli.gpu_check import main
except ImportError as error:  # psutil, say, missing from the Python this runs under
    print(f"gpu-check: {error.name or error} is not installed for {sys.executable} "
          "(make gpu-check uses phasetop's .venv)", file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())
