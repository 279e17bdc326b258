#!/bin/sh
# `make demo-fleet`: the fleet lab with load (a real Prometheus scraping three phasetop simulators and two DCGM
# stand-ins), the fleet screen on it, and the lab stopped whole when the UI exits, however it exits.
set -eu
BIN=${BIN:-.venv/bin}
dir=$(mktemp -d "${TMPDIR:-/tmp}/phasetop-demo-fleet.XXXXXX")
lab=""
stop_lab() {
    if [ -n "$lab" ]; then
        kill -TERM "$lab" 2>/dev/null || true
        wait "$lab" 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap stop_lab EXIT
trap 'exit 130' INT TERM HUP
# Its output to files: the UI owns the terminal once it opens.
"$BIN/python" -m tui.sim.fleet_lab --load >"$dir/out" 2>"$dir/err" &
lab=$!
echo "phasetop demo-fleet: starting Prometheus, three simulators and two DCGM stand-ins..." >&2
url=""
while [ -z "$url" ]; do
    if ! kill -0 "$lab" 2>/dev/null; then
        echo "phasetop demo-fleet: the fleet lab did not start:" >&2
        tail -n 5 "$dir/err" >&2
        lab=""
        exit 1
    fi
    url=$(sed -n 's/^fleet lab: Prometheus at //p' "$dir/out")
    [ -n "$url" ] || sleep 0.2
done
"$BIN/phasetop" --prometheus "$url" --role-label role --no-save
