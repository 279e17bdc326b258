#!/bin/sh
# `make demo-fleet`: the fleet lab with load (a real Prometheus scraping three phasetop simulators and two DCGM
# stand-ins), the fleet screen on it, and the lab stopped whole when the UI exits, however it exits.
set -eu
BIN=${BIN:-.venv/bin}
READY_PREFIX="fleet lab: Prometheus at "  # tui.fleet_lab's READY_PREFIX: the line it prints once ready
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
# The lab's stdout is a FIFO this script reads: `read` blocks until the ready line comes, or ends at EOF when the
# lab exits without one (its own start-up has deadlines: each simulator's, then 30 s for Prometheus's first
# scrapes). A file polled in a loop raced the background shell that creates it (`sed: can't read …/out`).
# Its stderr to a file: the UI owns the terminal once it opens.
mkfifo "$dir/ready"
"$BIN/python" -m tui.fleet_lab --load 2>"$dir/err" >"$dir/ready" &
lab=$!
echo "phasetop demo-fleet: starting Prometheus, three simulators and two DCGM stand-ins..." >&2
# Held open until this script exits, so the lab never writes to a FIFO with no reader.
exec 3<"$dir/ready"
url=""
while [ -z "$url" ] && IFS= read -r line <&3; do
    case $line in
        "$READY_PREFIX"*) url=${line#"$READY_PREFIX"} ;;
    esac
done
if [ -z "$url" ]; then
    status=0
    wait "$lab" || status=$?
    lab=""
    echo "phasetop demo-fleet: the fleet lab did not start (exit status $status):" >&2
    tail -n 5 "$dir/err" >&2
    exit 1
fi
"$BIN/phasetop" --prometheus "$url" --role-label role --no-save 3<&-
