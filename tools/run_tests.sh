#!/usr/bin/env bash
# Set everything up and run the tests: posenc's doctests, tests/, and every chapter under nbval.
set -euo pipefail
. "$(dirname "$0")/venv.sh"
python -m pip install --quiet -e ".[test]"
# One worker per core; a file's tests (a chapter's cells) stay together, in order.
python -m pytest --nbval -n auto --dist loadfile "$@"
