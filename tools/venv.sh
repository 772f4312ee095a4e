# Sourced by the two entry scripts: create .venv on first use and activate it.
# PYTHON picks the interpreter that creates it (default python3, 3.10 or later).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ ! -x .venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
# shellcheck disable=SC1091
. .venv/bin/activate
# PyTorch before posenc asks for it: without an NVIDIA GPU the CPU build, not pip's default
# CUDA build (several GB); a torch already installed is kept. It says which.
python -m tools.install_torch
