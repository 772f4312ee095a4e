#!/usr/bin/env bash
# Set everything up and run the tests: posenc's doctests, tests/, and every chapter under nbval.
set -euo pipefail
. "$(dirname "$0")/venv.sh"
python -m pip install --quiet -e ".[test]"
# Everything but the timed tests on one worker per core (a file's tests, a chapter's cells,
# stay together, in order); then the timed ones (chapter 13's measurements) alone, so no
# other test competes for the cores they measure. Exit status 5 means "nothing selected".
status=0
python -m pytest --nbval -n auto --dist loadfile -m "not timed" "$@" || status=$?
timed=0
python -m pytest --nbval -m timed "$@" || timed=$?
for s in "$status" "$timed"; do
  if [ "$s" -ne 0 ] && [ "$s" -ne 5 ]; then exit "$s"; fi
done
if [ "$status" -eq 5 ] && [ "$timed" -eq 5 ]; then exit 5; fi
