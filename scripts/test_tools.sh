#!/usr/bin/env bash
# The system tools the tests run, each installed from Debian's packages where it is missing (`make test` and CI
# both call this): tmux (tests/terminal drive the UI in it), prometheus (tests/fleet start the binary themselves)
# and chromium (tests/web drive `phasetop web` in it through playwright: the system browser, no download).
# Where nothing can be installed (no apt-get, no root and no sudo) it says which tool is missing and how to get it.
set -euo pipefail
missing=()
for tool in tmux prometheus chromium; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo="sudo"
    else
        echo "missing for the tests: ${missing[*]} (install them: apt-get install ${missing[*]}, or run as root)" >&2
        exit 1
    fi
fi
if ! command -v apt-get >/dev/null; then
    echo "missing for the tests: ${missing[*]} (no apt-get here: install them with this system's package manager)" >&2
    exit 1
fi
echo "installing the tests' tools: ${missing[*]} (Debian packages, once)" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
