"""PromQL text for the fleet view: escaped label matchers, selectors, and one builder per per-instance figure.

Every label value that goes into a query (a user's `--label-filter`, a model id) passes through `escape`, so
a value with quotes, backslashes or newlines can neither break the query nor change what it selects.
Figures are grouped `by (job, instance)`: the two labels Prometheus gives every scrape target.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

INSTANCE_LABELS = ("job", "instance")
"""The labels that name one scraped server (Prometheus sets both on every target)."""

MATCH_OPS = ("=~", "!~", "!=", "=")
"""PromQL's label match operators, longest first (so `=~` is not read as `=`)."""

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def escape(value: str) -> str:
    """A label value as the inside of a PromQL double-quoted string: backslash, quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass(frozen=True, slots=True)
class Matcher:
    """One label matcher, `label op "value"`."""

    label: str
    op: str
    value: str

    def __post_init__(self) -> None:
        if not _LABEL_NAME.fullmatch(self.label):
            raise ValueError(f"{self.label!r} is not a label name (letters, digits and _, not starting with a digit)")
        if self.op not in MATCH_OPS:
            raise ValueError(f"{self.op!r} is not a label match operator ({', '.join(MATCH_OPS)})")

    def text(self) -> str:
        return f'{self.label}{self.op}"{escape(self.value)}"'


def parse_matcher(text: str) -> Matcher:
    """`role=decode`, `job!=test`, `model_name=~"llama.*"` (quotes optional) as a Matcher; ValueError otherwise."""
    for op in MATCH_OPS:
        label, found, value = text.partition(op)
        if found:
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            return Matcher(label.strip(), op, value)
    raise ValueError(f"{text!r} is not LABEL=VALUE (or !=, =~, !~)")


def selector(name: str, matchers: Sequence[Matcher] = ()) -> str:
    """`name{a="x",b=~"y"}`; the name is a metric name phasetop knows (`vllm:…` included), never user text."""
    inside = ",".join(m.text() for m in matchers)
    return f"{name}{{{inside}}}" if inside else name


def _by(*extra: str) -> str:
    return f"by ({', '.join((*INSTANCE_LABELS, *extra))})"


def gauge_query(name: str, matchers: Sequence[Matcher] = (), fraction: bool = False) -> str:
    """A gauge per instance: summed over its label sets (engines, ranks), averaged for a fraction (KV usage)."""
    return f"{'avg' if fraction else 'sum'} {_by()} ({selector(name, matchers)})"


def by_label_query(name: str, label: str, matchers: Sequence[Matcher] = ()) -> str:
    """A gauge per instance and per value of `label` (vLLM's waiting requests by `reason`)."""
    return f"sum {_by(label)} ({selector(name, matchers)})"


def rate_query(name: str, matchers: Sequence[Matcher] = (), window: str = "1m") -> str:
    """A counter's per-second rate per instance over `window`."""
    return f"sum {_by()} (rate({selector(name, matchers)}[{window}]))"


def bucket_rates_query(name: str, matchers: Sequence[Matcher] = (), window: str = "1m", by: Sequence[str] = INSTANCE_LABELS) -> str:
    """A histogram's bucket rates summed `by (…, le)`: what histogram_quantile reads, and the bucket bounds with it."""
    return f"sum by ({', '.join((*by, 'le'))}) (rate({selector(name + '_bucket', matchers)}[{window}]))"


def quantile_query(q: float, name: str, matchers: Sequence[Matcher] = (), window: str = "1m",
                   by: Sequence[str] = INSTANCE_LABELS) -> str:
    """`histogram_quantile(q, sum by (le, …) (rate(name_bucket[window])))`: q of one histogram per group of `by`.

    With `by=()` it is the merged quantile of every instance selected: the quantile of the summed bucket rates,
    which is the fleet's own distribution (an average of per-instance quantiles is not a quantile of anything).
    """
    return f"histogram_quantile({q:g}, {bucket_rates_query(name, matchers, window, by)})"


def mean_query(name: str, matchers: Sequence[Matcher] = (), window: str = "1m") -> str:
    """A histogram's mean observation per instance over the window: rate of its sum ÷ rate of its count."""
    return f"{rate_query(name + '_sum', matchers, window)} / {rate_query(name + '_count', matchers, window)}"


def source_rate_query(name: str, label: str, value: str, matchers: Sequence[Matcher] = (), window: str = "1m") -> str:
    """The rate of one label value of a counter (`prompt_tokens_by_source_total{source="external_kv_transfer"}`)."""
    return rate_query(name, (*matchers, Matcher(label, "=", value)), window)


def changes_query(name: str, matchers: Sequence[Matcher] = (), lookback: str = "10m") -> str:
    """How many times a gauge changed per instance in the lookback: a process start time that changed is a restart."""
    return f"max {_by()} (changes({selector(name, matchers)}[{lookback}]))"


def max_query(name: str, matchers: Sequence[Matcher] = ()) -> str:
    """The largest value per instance (`up`, `process_start_time_seconds`: one series per target)."""
    return f"max {_by()} ({selector(name, matchers)})"


def names_regex(names: Sequence[str]) -> str:
    """An anchored alternation of metric names for `{__name__=~"…"}`, regex metacharacters escaped."""
    return "|".join(re.escape(name) for name in sorted(set(names)))


def families_match(names: Sequence[str], matchers: Sequence[Matcher] = ()) -> str:
    """The series selector (for /api/v1/series) of every series of these names: which instance exports which family."""
    return "{" + ",".join((Matcher("__name__", "=~", names_regex(names)).text(), *(m.text() for m in matchers))) + "}"


def duration(seconds: float) -> str:
    """Seconds as a PromQL duration (`90s`, `1m`): whole seconds, at least one."""
    whole = max(1, round(seconds))
    return f"{whole // 60}m" if whole % 60 == 0 else f"{whole}s"


def exposition(samples: Sequence[tuple[dict[str, str], float]]) -> str:
    """Prometheus's answer for one target's series, back as the text its /metrics served (untyped lines), so the
    main screen reads an instance through Prometheus as it reads a scrape: `name{label="v"} value` per series.
    Label values are escaped as in a query (the two formats escape alike); a sample with no name is left out."""
    lines = []
    for labels, value in samples:
        name = labels.get("__name__")
        if not name:
            continue
        inside = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items() if k != "__name__" and _LABEL_NAME.fullmatch(k))
        number = "NaN" if value != value else "+Inf" if value == float("inf") else "-Inf" if value == float("-inf") else repr(value)
        lines.append(f"{name}{{{inside}}} {number}" if inside else f"{name} {number}")
    return "\n".join(lines) + "\n"
