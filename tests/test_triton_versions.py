"""``tools/triton_versions.py``: which Tritons it checks, and what it reports (the checks
themselves are ``tests/test_triton_launch.py`` and the kernel's tests, run under each)."""

import json

import pytest

from tools import triton_versions as tv


@pytest.mark.parametrize(
    ("listed", "newest"),
    [
        (
            ["3.9.0", "3.8.0", "3.7.1", "3.7.0", "3.0.0", "2.3.1"],
            ["3.0.0", "3.7.1", "3.8.0", "3.9.0"],
        ),
        (["3.10.0", "3.9.0", "3.10.2", "3.10.1"], ["3.9.0", "3.10.2"]),  # numbers, not text
        (["3.6.0rc1", "3.5.0", " 3.5.1"], ["3.5.1"]),  # no pre-release; pip's spacing kept out
        (["2.3.1", "2.2.0"], []),  # older than posenc accepts
        (["4.0.0", "3.9.0"], ["3.9.0", "4.0.0"]),
    ],
)
def test_the_newest_patch_of_each_release_from_3_0(listed, newest):
    assert tv.newest_patches(listed) == newest


@pytest.mark.parametrize("failing", [(), ("3.2.0",)])
def test_one_line_per_version_and_the_exit_status(failing, tmp_path, monkeypatch, capsys):
    installed, checked = [], []

    def install(version, into):
        installed.append((version, into))
        return into / f"triton-{version}"

    def check(version, folder, tests):
        checked.append((version, folder.name, tuple(tests)))
        return version not in failing, f"{len(tests)} passed"

    monkeypatch.setattr(tv, "install", install)
    monkeypatch.setattr(tv, "check", check)
    status = tv.main(["3.1.0", "3.2.0", "3.6.0", "--kernel", "--into", str(tmp_path)])
    lines = capsys.readouterr().out.splitlines()
    assert status == (1 if failing else 0)
    assert installed == [(v, tmp_path) for v in ("3.1.0", "3.2.0", "3.6.0")]
    both = tv.LAUNCH_TESTS + tv.KERNEL_TESTS
    assert checked == [
        ("3.1.0", "triton-3.1.0", tv.LAUNCH_TESTS),  # its interpreter writes nothing
        ("3.2.0", "triton-3.2.0", both),
        ("3.6.0", "triton-3.6.0", both),
    ]
    assert [line.split()[:3] for line in lines[:3]] == [
        ["Triton", "3.1.0", "ok"],
        ["Triton", "3.2.0", "FAILED" if failing else "ok"],
        ["Triton", "3.6.0", "ok"],
    ]
    assert "no interpreter tests" in lines[0] and "interpreter" not in lines[1]
    assert json.loads(lines[-1]) == {"3.1.0": True, "3.2.0": not failing, "3.6.0": True}
