#!/usr/bin/env bash
# What the end-to-end tests drive besides the project itself: Debian's Chromium for the browser
# test (tests/e2e/test_web.py drives it with Playwright; no test tool downloads a browser) and tmux
# for the dashboard seen as a person sees it (tests/e2e/test_one_truth.py). Installs what is
# missing, on a machine with apt-get where this runs as root; otherwise says why not (the browser
# test then skips saying the same). Never fails the build.
set -uo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing+=(chromium)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
if [ "${#missing[@]}" = 0 ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "browser.sh: no ${missing[*]}, and no apt-get as root to install them" >&2
    exit 0
fi
echo "browser.sh: installing Debian's ${missing[*]} for the end-to-end tests (once)" >&2
if ! { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
    echo "browser.sh: apt-get could not install ${missing[*]}" >&2
fi
exit 0
