"""posenc uses torch's and Triton's public APIs, and a CPU call of the fast path goes straight
to its C loop."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

from posenc import fast
from posenc.fast import cpu_kernel

PACKAGE = Path(__file__).resolve().parents[1] / "posenc"

#: Names of torch's and Triton's internals that posenc must not use.
PRIVATE = re.compile(
    r"torch\._C\b|torch\._dynamo|_functorch|\._base\b|_cdata|_increment_version"
    r"|triton\.(runtime|backends|compiler|knobs|_C)\b|driver\.active|launch_metadata"
    r"|launch_enter_hook|CompiledKernel|CudaLauncher|_current_level"
)

#: The one place torch offers no public way (fast/_checks.py says why), between its markers.
ALLOWED = PACKAGE / "fast" / "_checks.py"
START = "# --- the one place posenc reads torch's internals"
END = "# --- the end of that place"


def _private_uses(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    inside = False
    found = []
    for number, line in enumerate(lines, 1):
        if path == ALLOWED and line.startswith(START):
            inside = True
        elif path == ALLOWED and line.startswith(END):
            inside = False
        elif not inside and PRIVATE.search(line):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    return found


def test_posenc_uses_public_apis_only():
    found = [use for path in sorted(PACKAGE.rglob("*.py")) for use in _private_uses(path)]
    assert found == []


def test_the_grep_finds_a_private_name(tmp_path):
    """The check above can fail: a module reaching for torch._C is reported."""
    module = tmp_path / "bad.py"
    module.write_text("import torch\nlevel = torch._C._functorch.maybe_current_level()\n")
    assert PRIVATE.search(module.read_text())
    assert not PRIVATE.search("import triton\nimport triton.language as tl\nkernel[grid](x)\n")


def test_the_allowed_place_is_marked_once():
    text = ALLOWED.read_text(encoding="utf-8")
    assert text.count(START) == 1 and text.count(END) == 1
    assert text.index(START) < text.index(END)


def _posenc_frames(call) -> list[str]:
    """The posenc functions ``call()`` enters, in order, up to the C loop's wrapper."""
    frames: list[str] = []

    def profile(frame, event, arg):
        code = frame.f_code
        done = frames and frames[-1] == "cpu_kernel._run"
        if event == "call" and str(PACKAGE) in code.co_filename and not done:
            frames.append(f"{Path(code.co_filename).stem}.{code.co_name}")

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return frames


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("model", [False, True], ids=["contiguous", "model layout"])
@pytest.mark.parametrize("positions", [None, "tensor"])
def test_a_cpu_call_reaches_the_c_loop_in_few_frames(layout, model, positions):
    """``posenc.fast.apply_rope`` on a CPU tensor enters no GPU code: at most 8 posenc frames
    from the call to the C loop (after a first call has cached the tables)."""
    if not cpu_kernel.available():
        pytest.skip(f"no C loop here: {cpu_kernel.status()}")
    x = torch.randn(2, 6, 4, 16)  # [B, T, H, D]
    x = x.transpose(1, 2) if model else x
    p = torch.arange(x.shape[-2]) + 3 if positions else None

    def call():
        return fast.apply_rope(x, p, layout=layout)

    call()
    frames = _posenc_frames(call)
    assert frames[-1] == "cpu_kernel._run", frames
    assert len(frames) <= 8, frames
    assert not any("triton" in f for f in frames), frames
