#!/usr/bin/env bash
# Set everything up and run the tests: posenc's doctests, tests/, and every chapter under nbval.
set -euo pipefail
. "$(dirname "$0")/venv.sh"
python -m pip install --quiet -e ".[test]"
python -m pytest --nbval "$@"
