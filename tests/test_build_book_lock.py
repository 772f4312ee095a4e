"""``bash tools/build_book.sh`` run twice at once in one clone builds once at a time.

Two builds at once each wrote ``_build/`` and ``_vendor/``, and the book they left mixed
pages of both. The script takes a lock for its whole run; here it runs in a copy of the
clone's layout whose ``venv.sh`` puts a stand-in ``python`` first on the PATH, which logs
when a build starts and ends and takes two seconds over it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

STAND_IN_PYTHON = """#!/bin/sh
# pip installs nothing; tools.build_book logs its start and end around two seconds' work
case "$*" in
  "-m pip"*) exit 0 ;;
  "-m tools.build_book"*) echo "start $PPID" >> "$BUILD_LOG"; sleep 2; echo "end $PPID" >> "$BUILD_LOG" ;;
  *) exit 3 ;;
esac
"""


@pytest.mark.skipif(shutil.which("flock") is None, reason="needs flock (util-linux)")
def test_two_builds_started_together_run_one_after_the_other(tmp_path):
    clone = tmp_path / "clone"
    (clone / "tools").mkdir(parents=True)
    shutil.copy(ROOT / "tools" / "build_book.sh", clone / "tools" / "build_book.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(STAND_IN_PYTHON)
    (bin_dir / "python").chmod(0o755)
    (clone / "tools" / "venv.sh").write_text(
        f'cd "$(dirname "${{BASH_SOURCE[0]}}")/.."\nexport PATH="{bin_dir}:$PATH"\n'
    )
    log = tmp_path / "builds.log"
    env = {"PATH": "/usr/bin:/bin", "BUILD_LOG": str(log)}
    runs = [
        subprocess.Popen(
            ["bash", str(clone / "tools" / "build_book.sh")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=60) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    events = [line.split() for line in log.read_text().splitlines()]
    assert [kind for kind, _ in events] == ["start", "end", "start", "end"], events
    assert events[0][1] == events[1][1] and events[2][1] == events[3][1], events
    assert sum("waiting for it" in err for _, err in outputs) == 1, outputs
