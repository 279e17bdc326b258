"""Server metrics: TTFT, ITL, running, waiting and KV usage, each a value with a sparkline of the last minute,
or charts of the last five minutes where the pane has room; prefix-cache hits, preemptions, saturation."""

from __future__ import annotations

import math

from textual.app import ComposeResult
from textual.containers import Container, Horizontal, Vertical
from textual.reactive import reactive
from textual.widgets import Label, Sparkline, Static

from tui.app.widgets.history_plot import HistoryPlot, Line
from tui.app.widgets.text import set_text
from tui.core.filled import filled
from tui.core.telemetry.metric_history import MetricHistory
from tui.core.telemetry.readings import HistogramQuantiles, MetricsSnapshot, saturation_text

HISTORY = 60
"""Scrapes each sparkline shows (a minute at the default interval)."""
IDLE = 0.0
"""A sparkline's value for a scrape with nothing to show (none in the window, not scraped yet): the
flat baseline. Skipping such scrapes left one old sample, which a Sparkline draws as a solid bar."""
CHART_MIN_ROWS = 11
"""Content rows for charts: two rows of cells, each a value line over three rows of lines (the lower cells
with their minute ticks under them), then the extra and saturation lines. Fewer: one sparkline per metric."""
CHART_MIN_COLUMNS = 62
"""Content columns for charts: two cells of 30 side by side."""

ROWS = (
    ("ttft", "TTFT p50/p99"),
    ("itl", "ITL p50/p99"),
    ("running", "running"),
    ("waiting", "waiting"),
    ("kv", "KV cache usage"),
)
SPARKLINE_SERIES = {"ttft": "ttft_p50_s", "itl": "itl_p50_s", "running": "running", "waiting": "waiting",
                    "kv": "kv_cache_usage"}
"""The history series each row's sparkline draws."""
CELLS = (("ttft", ("ttft",)), ("itl", ("itl",)), ("load", ("running", "waiting")), ("kv", ("kv",)))
"""The charts, in reading order (a 2×2 grid), and the rows above each: running and waiting share one."""
TITLES = dict(ROWS)


class MetricsPane(Vertical):
    """What the server's /metrics says: quantiles and rates over the scraper's rolling window (named on the
    border subtitle), gauges as of the latest scrape; and their history, which the pane keeps."""

    can_focus = True
    """Tab reaches the pane and scrolls it into view: on an 80×24 terminal over SSH there is no mouse."""

    # repaint=False: the rows repaint what changed; repainting the pane would redraw every row each scrape.
    snapshot: reactive[MetricsSnapshot | None] = reactive(None, always_update=True, repaint=False)
    """The latest scrape; None before the first."""
    reason: reactive[str | None] = reactive(None, repaint=False)
    """Why there are no metrics (no /metrics endpoint, server down)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.history = MetricHistory()
        """The charted metrics of the last minutes of scrapes."""
        series, first, second = self.history.series, HistoryPlot.FIRST, HistoryPlot.SECOND
        self._lines = {
            "ttft": [Line(series["ttft_p50_s"], first, 1e3), Line(series["ttft_p99_s"], second, 1e3)],
            "itl": [Line(series["itl_p50_s"], first, 1e3), Line(series["itl_p99_s"], second, 1e3)],
            "load": [Line(series["running"], first), Line(series["waiting"], second)],
            "kv": [Line(series["kv_cache_usage"], first, 100.0)],
        }
        """Each chart's lines, in ms, counts and percent; p99 (above p50) and waiting in the second colour."""

    def compose(self) -> ComposeResult:
        # One tree for both modes: the .tcss lays the cells out as rows with sparklines, or (-charts) as a grid
        # of charts under their values, so the value widgets are the same in both.
        with Container(id="metric-cells"):
            for cell, keys in CELLS:
                with Vertical(id=f"cell-{cell}", classes="metric-cell"):
                    with Container(classes="metric-rows"):
                        for key in keys:
                            with Horizontal(id=f"row-{key}", classes="metric-row"):
                                yield Label(TITLES[key], classes="metric-name")
                                yield Static("–", id=f"value-{key}", classes="metric-value", markup=False)
                                yield Sparkline(self._sparkline(key), id=f"spark-{key}")
                    yield HistoryPlot(id=f"chart-{cell}", classes="metric-chart", y_max=100.0 if cell == "kv" else None,
                                      x_ticks=cell in ("load", "kv"))
        yield Static("", id="metrics-extra", markup=False)
        yield Static("", id="metrics-saturation", markup=False)

    @property
    def charted(self) -> bool:
        """Charts are shown (the pane has room for them), not sparklines."""
        return self.has_class("-charts")

    def on_resize(self) -> None:
        size = self.content_size
        self.set_class(size.height >= CHART_MIN_ROWS and size.width >= CHART_MIN_COLUMNS, "-charts")
        if self.snapshot is not None and not self.reason:  # (a reason is said on that line in its place)
            self.call_after_refresh(self._show_extra, self.snapshot)

    def _show_extra(self, snapshot: MetricsSnapshot) -> None:
        """The line under the charts, broken between its figures at the pane's width."""
        extra = self.query_one("#metrics-extra", Static)
        set_text(extra, filled([(part, " · ") for part in _extra(snapshot)], extra.content_size.width or None))

    def watch_reason(self, reason: str | None) -> None:
        if reason:
            set_text(self.query_one("#metrics-extra", Static), f"no server metrics: {reason}")

    def watch_snapshot(self, snapshot: MetricsSnapshot | None) -> None:
        if snapshot is None:
            return
        self.history.add(snapshot)
        texts = {
            "ttft": _quantiles(snapshot.histograms.get("ttft_s")),
            "itl": _quantiles(snapshot.histograms.get("itl_s")),
            "running": _count(snapshot.running),
            "waiting": _waiting(snapshot),
            "kv": _kv(snapshot),
        }
        for key, _ in ROWS:
            set_text(self.query_one(f"#value-{key}", Static), texts[key])
            self.query_one(f"#spark-{key}", Sparkline).data = self._sparkline(key)
        for cell, _ in CELLS:  # a hidden chart only keeps its lines: it draws them when shown
            self.query_one(f"#chart-{cell}", HistoryPlot).show(self._lines[cell], self.history.newest_t)
        self._show_extra(snapshot)
        subtitle = window_text(snapshot.window_s)
        if subtitle != self.border_subtitle:  # Textual repaints the pane on every assignment, equal or not
            self.border_subtitle = subtitle
        self.set_class(snapshot.saturated, "-saturated")
        set_text(self.query_one("#metrics-saturation", Static), saturation_text(snapshot))

    def _sparkline(self, key: str) -> list[float]:
        """The last `HISTORY` scrapes on a fixed axis, the newest at the right edge, IDLE for a gap and before
        the first (the Sparkline cannot scale NaN or ±Inf; the value column shows them as sent)."""
        values = self.history.series[SPARKLINE_SERIES[key]].latest(HISTORY)
        return [IDLE] * (HISTORY - len(values)) + [IDLE if v is None else v for v in values]


def window_text(window_s: float | None) -> str:
    """What the quantiles and tok/s span, for the border: "p50/p99 · tok/s over 30 s" (the scraper's rolling
    window; shorter while it fills or after a restart). Rounded down: a 30.6 s span reads as the 30 s asked
    for. Running, waiting and KV are the latest scrape's gauges."""
    if window_s is None:
        return "p50/p99 · tok/s since start"
    span = f"{math.floor(window_s)}" if window_s >= 2 else f"{math.floor(window_s * 10) / 10:.1f}"
    return f"p50/p99 · tok/s over {span} s"


def _ms(value: float | None, edge: str | None, quantiles: HistogramQuantiles) -> str:
    if value is None:
        return "–"
    if edge == "first":
        return f"≤{quantiles.first_le * 1e3:,.0f}"
    if edge == "last":
        return f"≥{quantiles.last_le * 1e3:,.0f}"
    return f"{value * 1e3:,.0f}"


def _quantiles(quantiles: HistogramQuantiles | None) -> str:
    """p50/p99 in ms; a quantile on a bucket edge is shown as the bound it is (≤ or ≥)."""
    if quantiles is None or not quantiles.n:
        return "– (none in window)"
    p50 = _ms(quantiles.p50, quantiles.edges.get("p50"), quantiles)
    p99 = _ms(quantiles.p99, quantiles.edges.get("p99"), quantiles)
    return f"{p50} / {p99} ms  (n={quantiles.n:.0f})"


def _kv(snapshot: MetricsSnapshot) -> str:
    """"38%", or "38% · 12.5k of 32.8k tok" where the server gives its pool's size in tokens (fits the value column)."""
    if snapshot.kv_cache_usage is None:
        return "–"
    if snapshot.kv_cache_used_tokens is None or snapshot.kv_cache_size_tokens is None:
        return f"{snapshot.kv_cache_usage:.0%}"
    return f"{snapshot.kv_cache_usage:.0%} · {_tokens(snapshot.kv_cache_used_tokens)} of {_tokens(snapshot.kv_cache_size_tokens)} tok"


def _tokens(n: float) -> str:
    if not math.isfinite(n):
        return f"{n}"
    if n < 10_000:
        return f"{n:,.0f}"
    return f"{n / 1e3:.1f}k" if n < 1e6 else f"{n / 1e6:.2f}M"


def _waiting(snapshot: MetricsSnapshot) -> str:
    """The count, and how many of them are only deferred (not waiting for room); the call-out below has the split."""
    if snapshot.waiting is None:
        return "–"
    deferred = f" ({snapshot.waiting_deferred:.0f} deferred)" if snapshot.waiting_deferred else ""
    return f"{snapshot.waiting:.0f}{deferred}"


def _count(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def _extra(snapshot: MetricsSnapshot) -> list[str]:
    """The scrape's other figures, each whole: prefix-cache hits, preemptions, decode and prompt tok/s, and how the
    server speculates where it does."""
    parts = []
    if snapshot.prefix_cache_hit_rate is not None:
        parts.append(f"prefix-cache hits {snapshot.prefix_cache_hit_rate:.0%}")
    elif snapshot.prefix_cache_hit_rate_total is not None:
        parts.append(f"prefix-cache hits {snapshot.prefix_cache_hit_rate_total:.0%} (since start)")
    if snapshot.preemptions_total is not None:
        parts.append(f"preemptions {snapshot.preemptions_total:.0f}")
    if snapshot.generation_tok_s is not None:
        parts.append(f"decode {snapshot.generation_tok_s:,.0f} tok/s")
    if snapshot.prompt_tok_s is not None:
        parts.append(f"prompt {snapshot.prompt_tok_s:,.0f} tok/s")
    if snapshot.speculation is not None:
        parts += snapshot.speculation.parts()
    return parts
