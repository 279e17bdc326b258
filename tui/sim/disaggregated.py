"""`phasetop sim --disaggregated`: a front with vLLM's OpenAI API, as vLLM's disaggregation proxy presents it, before
prefill and decode workers, each its own simulated device with its own scheduler, KV pool and /metrics on its own port.

A request prefills on a prefill worker (one token asked for and thrown away, as the proxy asks with max_tokens=1);
then a decode worker reserves blocks for its prompt (it waits while its pool is full), pulls the KV over the link
(bytes / rate + latency, one transfer at a time into each decode worker), computes the last prompt token and
decodes, and the client reads its tokens through the front. Each pool is taken round robin, as the proxy does.
With `split_one_device` every worker is a share of one device: its memory divided between them (each holds the
weights), its steps time-sliced with theirs, and the KV copied within its memory unless a link is named.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tui.core.experiments.disaggregation import (
    DEFAULT_KV_LINK,
    KV_LINKS,
    KvLink,
    device_copy_link,
    kv_transfer_bytes,
    kv_transfer_tokens,
    split_memory_utilization,
)
from tui.sim.blocks import BLOCK_SIZE
from tui.sim.engine import EngineDriver, Stream, now, sleep_until
from tui.sim.exposition import Exposition, counter, merged
from tui.sim.options import SimOptions
from tui.sim.step_cost import ConfigError, EngineConfig
from tui.sim.physics import Sequence as EngineSequence
from tui.sim.serve import serve_apps
from tui.sim.server import build_app, new_state, spans_for
from tui.sim.state import SimState, state_of


@dataclass(frozen=True, slots=True)
class DisaggregatedOptions:
    """The front's options and each worker's, the link between them, and whether they share one device."""

    front: SimOptions
    prefill: tuple[SimOptions, ...]
    decode: tuple[SimOptions, ...]
    link: KvLink
    split_one_device: bool

    @property
    def workers(self) -> tuple[tuple[str, SimOptions], ...]:
        """("prefill-0", its options), …, then ("decode-0", …), …"""
        return tuple((f"{o.role}-{o.engine_label}", o) for o in (*self.prefill, *self.decode))


def disaggregated_options(base: SimOptions, prefill_workers: int = 1, decode_workers: int = 1, link: KvLink | None = None,
                          split_one_device: bool = False) -> DisaggregatedOptions:
    """Every worker with `base`'s flags (on a share of one device when split); ConfigError in one line if it cannot run."""
    if prefill_workers < 1 or decode_workers < 1:
        raise ConfigError("--prefill-workers and --decode-workers must be at least 1")
    config = _share_of_device(base.config, prefill_workers + decode_workers) if split_one_device else base.config
    link = link or (device_copy_link(config.device) if split_one_device else KV_LINKS[DEFAULT_KV_LINK])
    info = (("disaggregated", "True"), ("prefill_workers", str(prefill_workers)), ("decode_workers", str(decode_workers)),
            ("kv_link", link.name), ("kv_link_gbs", f"{link.gbs:g}"), ("split_one_device", str(split_one_device)))

    def workers(role: str, count: int) -> tuple[SimOptions, ...]:
        # The front exports each request's span (its KV transfer in it); the workers, behind it, none.
        return tuple(replace(base, config=config, role=role, engine_label=str(i), disaggregation=info,
                             otlp_traces_endpoint=None) for i in range(count))

    return DisaggregatedOptions(replace(base, config=config, disaggregation=info), workers("prefill", prefill_workers),
                                workers("decode", decode_workers), link, split_one_device)


def _share_of_device(config: EngineConfig, instances: int) -> EngineConfig:
    """One instance's config when `instances` share the device: its memory share, the context length capped to the
    KV that share holds."""
    shared = replace(config, gpu_memory_utilization=split_memory_utilization(config.gpu_memory_utilization, instances))
    capacity = shared.num_gpu_blocks * BLOCK_SIZE
    if 0 < capacity < shared.model_len:
        shared = replace(shared, max_model_len=capacity)
    shared.validate()
    return shared


@dataclass(frozen=True, slots=True)
class KvTransfer:
    """One KV cache moved from a prefill worker to a decode worker."""

    request_id: str
    source: str
    target: str
    tokens: int
    nbytes: int
    seconds: float
    """Its time on the simulated clock the engines' stamps share (time scale applied): bytes / rate + latency, exact,
    as a step's end is; what the wire reports."""
    measured_s: float
    """How long it took by the wall clock (perf_counter), however late the loop woke."""
    time_scale: float
    link: KvLink

    def to_json(self) -> dict:
        return {"request_id": self.request_id, "source": self.source, "target": self.target, "tokens": self.tokens,
                "bytes": self.nbytes, "seconds": self.seconds, "measured_s": self.measured_s, "time_scale": self.time_scale,
                "link": self.link.name, "link_gbs": self.link.gbs}

    def line(self) -> str:
        """The log's line: the measured time at time scale 1, and the link's own figure beside it."""
        return (f"phasetop sim: kv transfer {self.request_id} {self.source} → {self.target}: {self.tokens:,} tokens, "
                f"{self.nbytes:,} bytes in {self.measured_s / self.time_scale * 1000:.3f} ms over {self.link.name} "
                f"({self.link.gbs:g} GB/s: {self.seconds / self.time_scale * 1000:.3f} ms)")


class KvPort:
    """A decode worker's inbound link: one transfer at a time, each bytes / rate + latency (time scale applied)."""

    def __init__(self, link: KvLink, time_scale: float) -> None:
        self.link = link
        self.time_scale = time_scale
        self._free = asyncio.Lock()

    async def pull(self, nbytes: int) -> tuple[float, float]:
        """Move `nbytes` once the link is free: its seconds on the loop clock, and as measured by the wall clock.

        Measured by perf_counter: the stamps' clock (`engine.now`) is read where the loop woke, however late.
        """
        async with self._free:
            loop = asyncio.get_running_loop()
            seconds = self.link.transfer_s(nbytes) * self.time_scale
            began = time.perf_counter()
            await sleep_until(loop, now() + seconds)
            return seconds, time.perf_counter() - began


class FrontDriver:
    """The front's side of what the routes ask of an engine driver (submit, abort, the emission lag): each request
    prefilled on a prefill worker, its KV pulled, and decoded on a decode worker."""

    record_written = EngineDriver.record_written
    """The same lag bookkeeping, over this front's own `lag_s`."""

    def __init__(self, prefill: Sequence[SimState], decode: Sequence[SimState], ports: Sequence[KvPort],
                 on_transfer: Callable[[KvTransfer], None]) -> None:
        self.config = decode[0].driver.config
        self.lag_s: list[float] = []
        self.transfers: list[KvTransfer] = []
        self.transfer_bytes = 0
        self.transfer_s = 0.0
        """The transfers' bytes and seconds so far: running sums, so a scrape does not walk every transfer."""
        self._prefill = itertools.cycle(enumerate(prefill))
        self._decode = itertools.cycle(enumerate(decode))
        self._ports = ports
        self._on_transfer = on_transfer
        self._ids = itertools.count()
        self._routes: dict[Stream, asyncio.Task] = {}
        self._decode_of: dict[Stream, SimState] = {}
        self._source_of: dict[EngineSequence, str] = {}
        self._pulls: set[asyncio.Task] = set()
        for index, state in enumerate(decode):
            state.driver.on_pull = functools.partial(self._start_pull, index, state)

    def start(self) -> None:
        """The workers' engines run with their own apps; the front has no loop of its own."""

    async def stop(self) -> None:
        for task in [*self._routes.values(), *self._pulls]:
            task.cancel()

    def submit(self, prompt_ids: list[int], max_tokens: int, finish_reason: str = "length") -> Stream:
        """A request arriving at the front: its stream, fed by the decode worker once it gets there."""
        loop = asyncio.get_running_loop()
        sequence = EngineSequence(f"{next(self._ids)}", tuple(prompt_ids), max_tokens, arrival=now(),
                                  finish_reason=finish_reason)
        stream = Stream(sequence)
        self._routes[stream] = loop.create_task(self._route(stream), name=f"sim-route-{sequence.request_id}")
        return stream

    def abort(self, stream: Stream) -> None:
        """The answer ended or its client left: stop it wherever it is, and count an abort on its decode worker."""
        route = self._routes.pop(stream, None)
        if route is not None and not route.done():
            route.cancel()
        decode = self._decode_of.pop(stream, None)
        if decode is not None:
            if not stream.sequence.finished:
                decode.metrics.count_abort()
            decode.driver.abort(stream)
        self._source_of.pop(stream.sequence, None)

    async def _route(self, stream: Stream) -> None:
        sequence = stream.sequence
        index, prefill = next(self._prefill)
        first = prefill.driver.submit(list(sequence.prompt_ids), 1)
        try:
            await first.take()
        finally:
            prefill.driver.abort(first)
        sequence.scheduled_at = first.sequence.scheduled_at  # its wait to be scheduled was the prefill worker's queue
        sequence.external_tokens = kv_transfer_tokens(sequence.prompt_tokens)
        sequence.kv_transfer_bytes = kv_transfer_bytes(self.config.layout, sequence.external_tokens,
                                                       self.config.kv_bytes_per_element)
        self._source_of[sequence] = f"prefill-{index}"
        _, decode = next(self._decode)
        self._decode_of[stream] = decode
        decode.driver.attach(stream)

    def _start_pull(self, index: int, decode: SimState, sequence: EngineSequence) -> None:
        task = asyncio.get_running_loop().create_task(self._pull(index, decode, sequence))
        self._pulls.add(task)
        task.add_done_callback(self._pulls.discard)

    async def _pull(self, index: int, decode: SimState, sequence: EngineSequence) -> None:
        port = self._ports[index]
        seconds, measured_s = await port.pull(sequence.kv_transfer_bytes or 0)
        sequence.kv_transfer_s = seconds
        transfer = KvTransfer(sequence.request_id, self._source_of.get(sequence, "prefill"), f"decode-{index}",
                              sequence.external_tokens, sequence.kv_transfer_bytes or 0, seconds, measured_s,
                              port.time_scale, port.link)
        self.transfers.append(transfer)
        self.transfer_bytes += transfer.nbytes
        self.transfer_s += transfer.seconds
        self._on_transfer(transfer)
        decode.driver.receive(sequence)


class FrontMetrics:
    """The front's /metrics: its decode workers' series (what its clients see: TTFT from arrival at the front, ITL,
    running, KV usage), merged family by family, and counters of the KV transfers.

    For the fleet view or Prometheus, scrape the workers: the front repeats the decode pool's series.
    """

    def __init__(self, decode: Sequence[SimState], driver: FrontDriver) -> None:
        self.series = [
            *merged([state.metrics.series for state in decode]),
            counter("phasetop_kv_transfers", "KV caches moved from prefill to decode workers.", {},
                    lambda: len(driver.transfers)),
            counter("phasetop_kv_transfer_bytes", "Bytes of KV cache moved.", {}, lambda: driver.transfer_bytes),
            counter("phasetop_kv_transfer_seconds", "Seconds the KV transfers took (time scale applied).", {},
                    lambda: driver.transfer_s),
        ]
        self.template = Exposition(self.series)
        """The text of every series with the values left out: each scrape fills them in."""

    def count_abort(self) -> None:
        """Counted on the decode worker the request was on (`FrontDriver.abort`)."""

    def exposition(self) -> bytes:
        """The text format of every series, from a snapshot of their values (see `exposition.Exposition`)."""
        return self.template.render()


async def transfers(request: Request) -> Response:
    """Simulator-only: every KV transfer so far (bytes, seconds), the log's lines as JSON."""
    return JSONResponse({"transfers": [t.to_json() for t in state_of(request).driver.transfers]})


async def serve_disaggregated(
    layout: DisaggregatedOptions,
    front_sock: socket.socket,
    worker_socks: Sequence[socket.socket],
    on_ready: Callable[[], None],
    on_transfer: Callable[[KvTransfer], None],
    stop_on_stdin_close: bool = False,
) -> None:
    """Serve the front on `front_sock` and each worker (`layout.workers`' order) on its socket, until stopped."""
    states = [new_state(options) for _, options in layout.workers]
    prefill, decode = states[:len(layout.prefill)], states[len(layout.prefill):]
    if layout.split_one_device:
        drivers = [state.driver for state in states]
        for driver in drivers:
            driver.device_peers = tuple(peer for peer in drivers if peer is not driver)
    ports = [KvPort(layout.link, layout.front.time_scale) for _ in decode]
    driver = FrontDriver(prefill, decode, ports, on_transfer)
    # Duck-typed: the routes ask no more of them.
    front = SimState(layout.front, driver, FrontMetrics(decode, driver), spans_for(layout.front))
    apps = [(build_app(layout.front, front, [Route("/sim/transfers", transfers, methods=["GET"])]), front_sock)]
    apps += [(build_app(options, state), sock)
             for (_, options), state, sock in zip(layout.workers, states, worker_socks, strict=True)]
    await serve_apps(apps, on_ready, stop_on_stdin_close)
