#!/bin/sh
# Install Debian's Chromium for the publish tests (tests/test_publish.py opens the generated site
# in headless Chromium: console errors, images, screenshot). Idempotent: does nothing when a
# Chromium that runs headless is already on PATH.
#
#   sh tests/install_chromium.sh        # as root, or with passwordless sudo
#
# Exit status 0 when `chromium --headless` works afterwards, non-zero with a message saying why
# not otherwise (the Chromium tests then skip with that message).
set -u

say() { echo "install_chromium: $*"; }
fail() { echo "install_chromium: error: $*" >&2; exit 1; }

find_chromium() {
    for name in chromium chromium-browser google-chrome google-chrome-stable; do
        if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
    done
    return 1
}

headless_works() {
    exe=$(find_chromium) || return 1
    tmp=$(mktemp -d) || return 1
    timeout 60 "$exe" --headless --no-sandbox --disable-gpu --disable-background-networking \
        --user-data-dir="$tmp/profile" --dump-dom "data:text/html,<p>ok</p>" >"$tmp/out" 2>/dev/null
    grep -q "<p>ok</p>" "$tmp/out"
    rc=$?
    rm -rf "$tmp"
    return $rc
}

if headless_works; then
    say "$(find_chromium) runs headless; nothing to do"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 \
    || fail "Chromium is missing and apt-get is not available: install Chromium by hand"

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    fail "installing chromium needs root: run this script as root (or with passwordless sudo)"
fi

say "installing chromium with apt-get"
$SUDO apt-get update -q || fail "apt-get update failed"
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    chromium fonts-dejavu-core \
    || fail "apt-get install chromium failed (Debian's package; Ubuntu's is a snap wrapper that" \
        "does not run in containers)"

if headless_works; then
    say "$(find_chromium) runs headless"
    exit 0
fi
fail "chromium was installed but does not run headless"
