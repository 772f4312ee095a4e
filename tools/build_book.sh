#!/usr/bin/env bash
# Set everything up and build the HTML book from the notebooks' stored outputs.
set -euo pipefail
# One build at a time in a clone: two at once would each install into .venv and write
# _build/ and _vendor/, leaving a book mixed from both. The second waits for the first
# (flock, from util-linux; where there is none, builds are not serialised).
mkdir -p "$(dirname "$0")/../_build"
exec 9>"$(dirname "$0")/../_build/.build_book.lock"
if command -v flock >/dev/null; then
  if ! flock --nonblock 9; then
    echo "another build of the book is running in this clone: waiting for it" >&2
    flock 9
  fi
fi
. "$(dirname "$0")/venv.sh"
python -m pip install --quiet -e ".[docs]"
python -m tools.build_book "$@"
