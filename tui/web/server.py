"""textual-serve's server with phasetop's page, its own start-up line, and no frame locals in its log."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp_jinja2
from aiohttp import web
from textual_serve.server import Server, to_int

PAGE_DIR = Path(__file__).parent / "page"


class WebServer(Server):
    """Serves `command` (the UI, run once per browser tab) on host:port.

    The page is phasetop's own (`page/index.html`): textual-serve's loads its font from another host (a room's
    projector may have no network, and the page fetches nothing the user did not ask for) and writes the
    server's own address into the page, so a tab through `ssh -L 9000:127.0.0.1:8080` would dial port 8080.
    The command is never shown: not in the page (its title is "phasetop"), not on the console.
    """

    def __init__(self, command: str, host: str, port: int, font_size: int, on_ready: Callable[[], None]) -> None:
        super().__init__(command, host=host, port=port, title="phasetop", templates_path=PAGE_DIR)
        self.font_size = font_size
        """The terminal's font size in pixels, unless the page's URL says `?fontsize=N`."""
        self._on_ready = on_ready
        self._sessions: set[asyncio.Task] = set()
        """The tabs' websocket handlers, each with its UI process."""

    def initialize_logging(self) -> None:
        # textual-serve's handler prints every frame's locals with a traceback: the UI's environment, where its
        # API key travels, among them. Warnings and errors only, as plain lines.
        logging.basicConfig(level=logging.WARNING, format="phasetop web: %(message)s")

    async def on_startup(self, app: web.Application) -> None:
        self._on_ready()

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        session = asyncio.current_task()
        self._sessions.add(session)
        try:
            return await super().handle_websocket(request)
        finally:
            self._sessions.discard(session)

    async def on_shutdown(self, app: web.Application) -> None:
        """Ctrl-C or SIGTERM: each open tab's UI is told to quit (and stops its simulator) before this exits.

        aiohttp would wait 60 s for the tabs' websockets to end by themselves, then cancel them; cancelled now,
        each handler asks its UI to quit and waits for it, as when a tab closes."""
        for session in self._sessions:
            session.cancel()
        await asyncio.gather(*self._sessions, return_exceptions=True)

    @aiohttp_jinja2.template("index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        return {"font_size": to_int(request.query.get("fontsize", ""), self.font_size)}
