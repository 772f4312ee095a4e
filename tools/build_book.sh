#!/usr/bin/env bash
# Set everything up and build the HTML book from the notebooks' stored outputs.
set -euo pipefail
. "$(dirname "$0")/venv.sh"
python -m pip install --quiet -e ".[docs]"
python -m tools.build_book "$@"
