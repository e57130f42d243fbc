#!/usr/bin/env bash
# Debian's Chromium for the browser test (tests/e2e/test_web.py drives it with Playwright; no test
# tool downloads a browser). Installs it when it is missing, on a machine with apt-get where this
# runs as root; otherwise says why not, and the test skips saying the same. Never fails the build.
set -uo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "browser.sh: no chromium, and no apt-get as root to install it: the browser test will skip" >&2
    exit 0
fi
echo "browser.sh: installing Debian's chromium for the browser test (once)" >&2
if ! { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; then
    echo "browser.sh: apt-get could not install chromium: the browser test will skip" >&2
fi
exit 0
