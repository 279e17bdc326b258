"""The simulator's ASGI app: vLLM's routes (or Ollama's), /metrics, and the engine's lifespan."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Sequence

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tui.core.measure.stats import summarize_with_max
from tui.sim import ollama, openai
from tui.sim.admission import ApiError
from tui.sim.engine import EngineDriver
from tui.sim.metrics import SimMetrics
from tui.sim.options import VLLM_VERSION, SimOptions
from tui.sim.span_export import SpanExporter
from tui.sim.state import SimState, state_of
from tui.sim.streaming import RAW_SEND


class ApiKeyGuard:
    """vLLM's --api-key: paths under /v1 need `Authorization: Bearer <key>`; /metrics, /health, … do not."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self._expected = api_key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] != "OPTIONS" and scope["path"].startswith("/v1"):
            if not self._authorised(scope):
                await JSONResponse({"error": "Unauthorized"}, status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _authorised(self, scope: Scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, token = value.partition(b" ")
                return scheme.lower() == b"bearer" and secrets.compare_digest(token.strip(), self._expected)
        return False


async def health(request: Request) -> Response:
    return Response(status_code=200)


async def version(request: Request) -> Response:
    return JSONResponse({"version": VLLM_VERSION, "phasetop_sim": state_of(request).options.sim_info()})


async def metrics(request: Request) -> Response:
    return Response(state_of(request).metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


async def emission(request: Request) -> Response:
    """Simulator-only: how late tokens were written versus their simulated time (the benchmark reads it)."""
    driver = state_of(request).driver
    lags = list(driver.lag_s)
    if request.query_params.get("reset"):
        driver.lag_s.clear()
    return JSONResponse({"lag_s": summarize_with_max(lags)})


async def _api_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, ApiError)
    return JSONResponse(error.body(), status_code=error.status)


class SimApp(Starlette):
    """Starlette, keeping the server's own `send` in the scope for the token streams' writes.

    Starlette's middleware wraps `send` twice to watch for `http.response.start`; a stream sends its
    start through those wrappers and its body chunks straight to the server (`streaming.RAW_SEND`).
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[RAW_SEND] = send
        await super().__call__(scope, receive, send)


def new_state(options: SimOptions) -> SimState:
    """One simulator's engine driver and metrics (not started)."""
    driver = EngineDriver(options.config, options.time_scale, stream_interval=options.stream_interval)
    sim_metrics = SimMetrics(driver, options.served_model_name, options.sim_info(), options.enable_mfu_metrics,
                             options.engine_label, options.role)
    driver.on_step = sim_metrics.on_step
    return SimState(options, driver, sim_metrics, spans_for(options))


def spans_for(options: SimOptions) -> SpanExporter | None:
    """The exporter of its finished requests' spans, when `--otlp-traces-endpoint` asks for one (not started)."""
    return SpanExporter(options.otlp_traces_endpoint) if options.otlp_traces_endpoint else None


def build_app(options: SimOptions, state: SimState | None = None, extra_routes: Sequence[Route] = ()) -> Starlette:
    """The app for one simulator (or for `state`, made elsewhere); its engine loop starts and stops with the app's lifespan."""
    common = [Route("/health", health, methods=["GET"]), Route("/sim/emission", emission, methods=["GET"]), *extra_routes]
    if options.api == "ollama":
        routes = [*common, *ollama.ROUTES]
    else:
        routes = [*common, Route("/version", version, methods=["GET"]), Route("/metrics", metrics, methods=["GET"]),
                  *openai.ROUTES]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        sim = state or new_state(options)
        app.state.sim = sim
        sim.driver.start()
        if sim.spans is not None:
            sim.spans.start()
        try:
            yield
        finally:
            await sim.driver.stop()
            if sim.spans is not None:
                sim.spans.stop()

    app = SimApp(routes=routes, lifespan=lifespan, exception_handlers={ApiError: _api_error})
    if options.api_key:
        app.add_middleware(ApiKeyGuard, api_key=options.api_key)
    return app
