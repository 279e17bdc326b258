"""screenshots/real-engine.svg: the app on llama.cpp's llama-server (Gemma 3 270M, CPU), after `make real-engine`.

A short prompt runs to the end, then a long one is caught mid-answer: the long prefill is plain to see.
"""

from __future__ import annotations

import asyncio
import subprocess

from screenshots import OUT, SIZE, until

from tui.app.app import PhasetopApp
from tui.app.screens.main import MainScreen
from tui.config import Settings
from tui.sources.llamacpp_server import LlamaServerProcess

REPO = OUT.parent


async def shoot(url: str) -> None:
    app = PhasetopApp(Settings(_env_file=None), url, None, None, save_runs=False)
    async with app.run_test(size=SIZE) as pilot:
        screen: MainScreen = app.screen
        await until(pilot, lambda: screen.api is not None and screen.cpu_ceiling is not None and screen.host is not None, 60)
        await pilot.press("1")
        await until(pilot, lambda: len(screen.timings) == 1 and screen.timings[0].output_tokens, 120)
        await pilot.press("2")
        await until(pilot, lambda: len(screen.timings) == 2 and len(screen.timings[1].token_offsets_s) > 30, 180)
        app.save_screenshot("real-engine.svg", path=str(OUT))


def main() -> None:
    model = subprocess.run([str(REPO / "scripts" / "real_engine.sh"), "model-path"], check=True, capture_output=True,
                           text=True).stdout.strip()
    with LlamaServerProcess.start(model) as server:
        asyncio.run(shoot(server.url))
    print(f"saved: {OUT / 'real-engine.svg'}")


if __name__ == "__main__":
    main()
