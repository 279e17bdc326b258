"""Model layouts: the numbers of a `config.json` that the roofline needs, and a few presets."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class ModelLayout:
    """The shape of a decoder-only transformer, as far as bytes and FLOPs per token go."""

    name: str
    params: float
    """Parameter count (weights read once per decode step)."""
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    max_model_len: int = 131072

    @classmethod
    def from_config(cls, config: dict[str, Any], name: str = "config.json") -> "ModelLayout":
        """Read a Hugging Face `config.json` (Llama-style keys; `head_dim` = hidden / heads unless given)."""
        try:
            hidden = int(config["hidden_size"])
            heads = int(config["num_attention_heads"])
            layers = int(config["num_hidden_layers"])
        except KeyError as missing:
            raise ValueError(f"{name}: missing {missing.args[0]!r}") from None
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or hidden // heads)
        params = float(config.get("num_parameters") or params_from_config(config))
        max_len = int(config.get("max_position_embeddings") or 131072)
        return cls(name, params, layers, hidden, heads, kv_heads, head_dim, max_len)

    @classmethod
    def from_file(cls, path: str | Path) -> "ModelLayout":
        path = Path(path)
        try:
            config = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read {path}: {exc}") from None
        return cls.from_config(config, name=config.get("_name_or_path") or path.parent.name or path.name)


def params_from_config(config: dict[str, Any]) -> float:
    """Parameter count of a Llama-style model: embeddings, attention, gated MLP, norms, LM head."""
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    intermediate = int(config.get("intermediate_size") or 4 * hidden)
    vocab = int(config.get("vocab_size") or 32000)
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp = 3 * hidden * intermediate
    per_layer = attention + mlp + 2 * hidden
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2)
    return float(layers * per_layer + embeddings + hidden)


MODELS: dict[str, ModelLayout] = {
    # The domain text's "common 8 billion parameter layout": 8e9 weights, 16 GB at 16 bit.
    "8b": ModelLayout("Llama-3.1-8B", 8.0e9, 32, 4096, 32, 8, 128, 131072),
    "llama-3.2-1b": ModelLayout("Llama-3.2-1B", 1.24e9, 16, 2048, 32, 8, 64, 131072),
    "llama-3.2-3b": ModelLayout("Llama-3.2-3B", 3.21e9, 28, 3072, 24, 8, 128, 131072),
    "qwen2.5-7b": ModelLayout("Qwen2.5-7B", 7.62e9, 28, 3584, 28, 4, 128, 32768),
    "llama-3.1-70b": ModelLayout("Llama-3.1-70B", 70.6e9, 80, 8192, 64, 8, 128, 131072),
    "gemma-3-270m": ModelLayout("Gemma-3-270M", 0.268e9, 18, 640, 4, 1, 256, 32768),
}
MODELS["llama-3.1-8b"] = MODELS["8b"]


def find_model(name_or_path: str) -> ModelLayout:
    """A preset by name (case and punctuation forgiven), or a `config.json` path (read: only for names the
    user gave; a name a server sends goes to `find_preset`)."""
    path = Path(name_or_path)
    if path.suffix == ".json" or path.is_file():
        return ModelLayout.from_file(path)
    layout = find_preset(name_or_path)
    if layout is None:
        raise ValueError(f"unknown model {name_or_path!r} (presets: {', '.join(MODELS)}; or a config.json path)")
    return layout


def find_preset(name: str) -> ModelLayout | None:
    """The preset `name` names (`8b`, `Llama-3.1-8B`, `meta-llama/llama-3.1-8b`), or None; never touches disk."""
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    key = key.removeprefix("meta-llama/").removeprefix("qwen/").removeprefix("google/")
    return MODELS.get(key)


_SERVED_SUFFIXES = ("instruct", "chat", "it", "hf", "base", "dynamic", "gguf")
"""Words a served model id adds to a layout's name that do not change its size."""
_QUANT_BITS = (
    (re.compile(r"^(fp8|int8|w8a8|w8a16|8bit|q8(_\d)?)$"), 8),
    (re.compile(r"^q6(_k)?$"), 6),
    (re.compile(r"^q5(_k)?(_[sm01])?$"), 5),
    (re.compile(r"^(awq|gptq|int4|w4a16|4bit|nf4|bnb|q4(_k)?(_[sm01])?)$"), 4),
)
"""Quantization tags in served ids (Hugging Face repos, Ollama tags, GGUF files) → weight bit width."""


def _preset_key(name: str) -> str:
    """A layout name with everything but letters, digits and dots dropped: "Llama-3.1-8B" → "llama3.18b"."""
    return re.sub(r"[^a-z0-9.]", "", name.lower())


_PRESETS_BY_KEY = {_preset_key(layout.name): layout for layout in MODELS.values()}


def find_served_model(model_id: str) -> tuple[ModelLayout, int] | None:
    """The preset layout and weight bit width a server's model id names, or None when it names none.

    Forgives what serving adds to a layout's name: an organisation (`meta-llama/`), `Meta-`, and
    `-Instruct`, `-it`, `-hf`; reads an Ollama tag (`llama3.1:8b`) as the name and size it is; and
    takes quantization tags (`-FP8`, `-AWQ`, `q4_K_M`) as the bit width. Anything else is unknown:
    a ceiling from a guessed layout would be a wrong figure that looks right.
    """
    name = model_id.strip().lower().rsplit("/", 1)[-1].removesuffix(".gguf").removeprefix("meta-")
    bits = 16
    kept = []
    for word in re.split(r"[-: ]+", name):
        tag_bits = next((b for pattern, b in _QUANT_BITS if pattern.match(word)), None)
        if tag_bits is not None:
            bits = min(bits, tag_bits)
        elif word and word not in _SERVED_SUFFIXES:
            kept.append(word)
    layout = _PRESETS_BY_KEY.get(_preset_key("".join(kept)))
    return (layout, bits) if layout is not None else None
