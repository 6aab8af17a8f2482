#!/bin/sh
# Install Debian's Chromium for the publish tests (tests/test_publish.py opens the generated site
# in headless Chromium: console errors, images, screenshot), and a CJK font (Debian's
# fonts-noto-cjk) so the seed articles' Chinese titles on the claims page render as text, not as
# boxes, in the screenshots. Idempotent: does nothing when a Chromium that runs headless is on
# PATH and fontconfig knows a Chinese font.
#
#   sh tests/install_chromium.sh        # as root, or with passwordless sudo
#
# Exit status 0 when `chromium --headless` works afterwards, non-zero with a message saying why
# not otherwise (the Chromium tests then skip with that message). A missing CJK font is a
# warning only: the pages still load, Chinese text just shows as boxes.
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

have_cjk_font() {
    command -v fc-list >/dev/null 2>&1 && [ -n "$(fc-list :lang=zh family 2>/dev/null)" ]
}

root_prefix() {  # prints the prefix for root commands; fails when there is no way to be root
    if [ "$(id -u)" -eq 0 ]; then
        echo ""
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        echo "sudo -n"
    else
        return 1
    fi
}

install_cjk_font() {  # never fails the script: without the font only the screenshots suffer
    if have_cjk_font; then
        return 0
    fi
    if ! command -v apt-get >/dev/null 2>&1 || ! SUDO=$(root_prefix); then
        say "warning: no CJK font and no apt-get as root to install fonts-noto-cjk; Chinese" \
            "text shows as boxes in screenshots"
        return 0
    fi
    say "installing fonts-noto-cjk with apt-get (Chinese titles in screenshots)"
    if [ -n "${APT_UPDATED:-}" ] || $SUDO apt-get update -q; then
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
            fonts-noto-cjk \
            || say "warning: apt-get install fonts-noto-cjk failed; Chinese text shows as boxes" \
                "in screenshots"
    else
        say "warning: apt-get update failed; fonts-noto-cjk not installed"
    fi
    return 0
}

if headless_works; then
    say "$(find_chromium) runs headless"
    install_cjk_font
    exit 0
fi

command -v apt-get >/dev/null 2>&1 \
    || fail "Chromium is missing and apt-get is not available: install Chromium by hand"

SUDO=$(root_prefix) \
    || fail "installing chromium needs root: run this script as root (or with passwordless sudo)"

say "installing chromium with apt-get"
$SUDO apt-get update -q || fail "apt-get update failed"
APT_UPDATED=1
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    chromium fonts-dejavu-core \
    || fail "apt-get install chromium failed (Debian's package; Ubuntu's is a snap wrapper that" \
        "does not run in containers)"
install_cjk_font

if headless_works; then
    say "$(find_chromium) runs headless"
    exit 0
fi
fail "chromium was installed but does not run headless"
