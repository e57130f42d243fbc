#!/usr/bin/env bash
# Install agentwatch with its development extras into .venv, then lint, type-check and test.
# This is the README's test command; .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[dev]'
# Bytecode for the hook's modules even where PYTHONDONTWRITEBYTECODE is set: without it every hook
# run recompiles them, which doubles its start-up time.
.venv/bin/python -m compileall -q src >/dev/null
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports --no-cache
# Debian's Chromium and tmux for the end-to-end tests, when missing and installable.
bash scripts/browser.sh
# pytest exits 5 when it collected no test: under `set -e` that fails the run, as it should.
.venv/bin/python -m pytest "$@"
