# Sourced by the two entry scripts: create .venv on first use and activate it.
# PYTHON picks the interpreter that creates it (default python3, 3.10 or later).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ ! -x .venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
# shellcheck disable=SC1091
. .venv/bin/activate
