#!/usr/bin/env bash
# Make sure .venv (in the current directory) is a virtual environment of $PYTHON (default python3).
# A .venv made by another interpreter (another Python, or one since removed) is made anew, not
# half-rewritten: its packages were built for that interpreter.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
want="$("$PYTHON" -c 'import sys; print(sys.base_prefix, sys.version)')"
if [ -e .venv ] && [ "$(.venv/bin/python -c 'import sys; print(sys.base_prefix, sys.version)' 2>/dev/null)" != "$want" ]; then
    echo "check.sh: .venv was made by another interpreter; making it anew" >&2
    rm -rf .venv
fi
"$PYTHON" -m venv .venv
