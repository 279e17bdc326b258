"""The core is pure and importing tui is light: proved in a fresh interpreter, as harlequin does."""

import subprocess
import sys

CHECK = """
import sys
import tui, tui.core.measure.records, tui.core.measure.stats, tui.core.hardware.roofline, tui.core.hardware.devices, tui.core.hardware.models
import pkgutil, importlib, tui.core
for info in pkgutil.walk_packages(tui.core.__path__, "tui.core."):
    importlib.import_module(info.name)
heavy = sorted(m for m in ("textual", "httpx", "rich", "textual_plotext", "tui.sources", "tui.app") if m in sys.modules)
print(",".join(heavy))
"""


def test_core_imports_neither_textual_nor_httpx():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_ceiling_command_does_not_load_textual():
    code = "import sys; from tui.cli.main import main; main(['ceiling', '--json']); print('textual' in sys.modules, file=sys.stderr)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip().endswith("False")
