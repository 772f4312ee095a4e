"""Every chapter, run the way a reader runs it in Colab: Colab's versions, the setup cell's install.

A fresh virtual environment gets the versions Colab ships (``tests/colab_versions.txt``,
from Colab's published ``pip freeze``), then a fake ``google.colab`` that the notebook
kernel imports at start, as Colab does. ``posenc`` is not installed: the chapters' setup
cell installs it, with its own pip command, from a wheel built from a copy of this checkout
(``POSENC_INSTALL_SOURCE`` points it there, as it points at the GitHub repository in Colab).
Then every chapter runs under nbval in that kernel, its stored outputs compared through the
project's sanitizer, offline (``HF_HUB_OFFLINE=1``).

Not reproducible here: Colab's Python 3.12 and torch 2.11.0+cu128. The environment has
Python 3.11 and torch 2.13.0 (CPU), the only torch wheel the test machines hold locally;
any other torch or Python downloads multi-GB CUDA builds from PyPI. Everything else is
Colab's version, installed from PyPI.

What the setup cell would change among the packages Colab already has is computed first
(``pip install --dry-run --report``) and must be nothing: in Colab, upgrading or downgrading
a package that the runtime has already imported (numpy, matplotlib, ipywidgets, ...)
leaves the old version in memory and forces a runtime restart before the chapter works.
New packages (gguf, llama-models, posenc) are additions and fine. After the run the
versions are checked again: the chapters passed with Colab's versions, not with upgrades.

The secret: Colab's ``userdata.get("HF_TOKEN")`` returns a fake token here and records
each call. With ``HF_HUB_OFFLINE=1`` ``posenc.data.embeddings.load`` takes the offline path without
asking for a token, so the chapters never read the secret; a probe after the run shows that
the secret is reachable (``posenc.data.llama._hf_token`` returns it once not offline). The token
must appear in no executed output, in no file written under the test's directories and in
nothing the run printed.

The nbval run loads this module as a plugin (``-p tests.test_colab_like``) for its one
hook, which records every executed cell's outputs for that scan.
"""

from __future__ import annotations

import hashlib
import json
import os
import runpy
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tools import setup_cell

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ROOT / "tests" / "colab_versions.txt"
FAKE_COLAB = ROOT / "tests" / "fake_colab"
KERNEL = "posenc-colab"
OUTPUTS_ENV = "POSENC_COLAB_LIKE_OUTPUTS"
# a run on this machine takes about 5 minutes; these only stop a hung step
INSTALL_TIMEOUT_S = 1200
RUN_TIMEOUT_S = 1800


def pytest_runtest_teardown(item):
    """In the nbval run: append each executed cell's outputs to a file of this worker."""
    folder = os.environ.get(OUTPUTS_ENV)
    outputs = getattr(item, "test_outputs", None)
    if folder and outputs is not None:
        with open(Path(folder) / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps({"cell": item.nodeid, "outputs": outputs}) + "\n")


def _run(args, *, log, **kwargs):
    """Run a command, its stdout and stderr kept in ``log`` (for the secret scan)."""
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)
    log.append(done.stdout + done.stderr)
    return done


def _check(done, what):
    assert done.returncode == 0, f"{what} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _copy_checkout(dest: Path) -> Path:
    """The tracked files and the untracked ones git does not ignore, as a clone would have."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def _pins() -> dict[str, Requirement]:
    pins = {}
    for line in VERSIONS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            pins[canonicalize_name(req.name)] = req
    return pins


def _installed(python: Path, log) -> dict[str, str]:
    script = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    done = _check(_run([str(python), "-c", script], log=log), "listing the packages")
    return {canonicalize_name(k): v for k, v in json.loads(done.stdout).items()}


def _would_change(python: Path, requirement: str, report: Path, log):
    """What installing ``requirement`` would up- or downgrade, and what it would add."""
    _check(
        _run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--dry-run",
                "--quiet",
                "--report",
                str(report),
                requirement,
            ],
            log=log,
            timeout=INSTALL_TIMEOUT_S,
        ),
        "pip install --dry-run",
    )
    installed = _installed(python, log)
    changes, additions = [], []
    for item in json.loads(report.read_text())["install"]:
        name = canonicalize_name(item["metadata"]["name"])
        new = item["metadata"]["version"]
        old = installed.get(name)
        if old is None:
            additions.append(f"{name} {new}")
        elif Version(new) != Version(old):
            way = "upgrade" if Version(new) > Version(old) else "downgrade"
            changes.append(f"{way} {name} {old} -> {new}")
    return sorted(changes), sorted(additions)


def _sources(report: Path) -> dict[str, int]:
    """Where pip took each installed file from: host (or local directory) -> count."""
    counts: dict[str, int] = defaultdict(int)
    for item in json.loads(report.read_text())["install"]:
        url = item["download_info"]["url"]
        counts[urlparse(url).netloc or url.rsplit("/", 1)[0]] += 1
    return dict(counts)


def _chapter_results(junit: Path) -> dict[str, dict[str, float]]:
    """Per chapter: cells passed, failed and skipped, and the seconds its cells took."""
    results: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for case in ET.parse(junit).iter("testcase"):
        chapter = case.get("file") or case.get("classname", "")
        chapter = Path(chapter.replace("notebooks.", "notebooks/")).name
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
        results[chapter][outcome] += 1
        results[chapter]["seconds"] += float(case.get("time", 0))
    return results


def _unstarted(junit: Path) -> set[str]:
    """Chapters in which no cell ran because the kernel never answered: every cell an error
    from jupyter_client's wait for the kernel, none passed."""
    cases: dict[str, list[str]] = defaultdict(list)
    for case in ET.parse(junit).iter("testcase"):
        chapter = case.get("file") or case.get("classname", "")
        chapter = Path(chapter.replace("notebooks.", "notebooks/")).name
        errors = [c.get("message", "") for c in case if c.tag in ("failure", "error")]
        cases[chapter].append(errors[0] if errors else "")
    return {
        name
        for name, messages in cases.items()
        if all("Kernel didn't respond" in m for m in messages)
    }


def _files_holding(root: Path, needles: list[bytes], *, skip: Path) -> list[Path]:
    """Files under ``root`` (not following links, not under ``skip``) holding a needle."""
    longest = max(map(len, needles))
    hits = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if Path(folder, d) != skip]
        for name in files:
            path = Path(folder, name)
            if path.is_symlink() or not path.is_file():
                continue
            with open(path, "rb") as f:
                tail = b""
                while chunk := f.read(1 << 24):
                    block = tail + chunk
                    if any(n in block for n in needles):
                        hits.append(path)
                        break
                    tail = block[-longest:]
    return hits


def _execute(notebook: Path, cells: list[str], *, log) -> list[str]:
    """Run ``cells`` in the Colab-like kernel, with the notebook's folder as the working
    directory; return each cell's printed text."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nbformat.write(nb, notebook)
    _check(
        _run(
            [
                str(Path(sys.executable).with_name("jupyter-execute")),
                "--kernel_name",
                KERNEL,
                "--timeout",
                "600",
                "--inplace",
                str(notebook),
            ],
            log=log,
            timeout=RUN_TIMEOUT_S,
        ),
        f"executing {notebook.name}",
    )
    ran = nbformat.read(notebook, as_version=4)
    return ["".join(o.get("text", "") for o in cell.outputs) for cell in ran.cells]


@pytest.mark.slow
@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="the environment's torch pin is the local CPU wheel, built for Python 3.11",
)
def test_every_chapter_passes_in_a_colab_like_environment(tmp_path, monkeypatch):
    # python -m puts the working directory on sys.path: this checkout's posenc.egg-info
    # would read as installed in the fresh environment
    monkeypatch.chdir(tmp_path)
    log: list[str] = []  # everything the run prints, scanned for the token at the end
    timings = {}
    started = time.monotonic()
    token = runpy.run_path(str(FAKE_COLAB / "google" / "colab" / "userdata.py"))["FAKE_HF_TOKEN"]
    pins = _pins()

    # chapter 15's model, in this project's cache (built once, about 40 s, when missing)
    offline = {**os.environ, "HF_HUB_OFFLINE": "1"}
    _check(
        _run([sys.executable, "-m", "posenc.data.smol"], log=log, cwd=ROOT, env=offline),
        "python -m posenc.data.smol",
    )
    from posenc.device import cache_dir

    # The run's cache links to the project's entries; what the run writes lands beside them
    # (and is scanned), the project's cache is left as it is.
    cache = tmp_path / "cache"
    cache.mkdir()
    for entry in cache_dir().iterdir():
        (cache / entry.name).symlink_to(entry)

    checkout = _copy_checkout(tmp_path / "checkout")
    timings["project cache and checkout copy"] = time.monotonic() - started
    t = time.monotonic()
    dist = tmp_path / "dist"
    _check(
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "--wheel-dir",
                str(dist),
                str(checkout),
            ],
            log=log,
            timeout=INSTALL_TIMEOUT_S,
        ),
        "building posenc's wheel",
    )
    (wheel,) = dist.glob("posenc-*.whl")

    env_dir = tmp_path / "colab"
    _check(_run([sys.executable, "-m", "venv", str(env_dir)], log=log), "python -m venv")
    python = env_dir / "bin" / "python"
    install_report = tmp_path / "install-report.json"
    _check(
        _run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--only-binary",
                ":all:",
                "--report",
                str(install_report),
                "-r",
                str(VERSIONS),
            ],
            log=log,
            timeout=INSTALL_TIMEOUT_S,
        ),
        "installing Colab's versions",
    )
    timings["wheel, venv, Colab's versions"] = time.monotonic() - t
    t = time.monotonic()
    print("installed from:", _sources(install_report))
    before = _installed(python, log)
    assert "posenc" not in before
    for name, pin in pins.items():
        assert name in before and pin.specifier.contains(before[name]), (name, before.get(name))

    # Colab's kernel imports google.colab at start: here an IPython startup file does it.
    site_packages = next((env_dir / "lib").glob("python3.*/site-packages"))
    (site_packages / "fake_colab.pth").write_text(f"{checkout / 'tests' / 'fake_colab'}\n")
    ipython_dir = tmp_path / "ipython"
    startup = ipython_dir / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-google-colab.py").write_text("import google.colab\n")
    kernels = tmp_path / "jupyter"
    _check(
        _run(
            [str(python), "-m", "ipykernel", "install", "--prefix", str(kernels), "--name", KERNEL],
            log=log,
        ),
        "installing the kernel",
    )
    spec_file = kernels / "share" / "jupyter" / "kernels" / KERNEL / "kernel.json"
    spec = json.loads(spec_file.read_text())
    spec["env"] = {"IPYTHONDIR": str(ipython_dir)}
    spec_file.write_text(json.dumps(spec, indent=1))

    requirement = f"posenc[book] @ {wheel.as_uri()}"
    changes, additions = _would_change(python, requirement, tmp_path / "dry-run.json", log)
    print("the setup cell would upgrade or downgrade:", changes or "nothing")
    print("the setup cell would add:", additions)
    timings["kernel, dry run"] = time.monotonic() - t

    # The kernels' world: a fresh home and temporary directory under tmp_path, offline.
    home, temp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    temp.mkdir()
    userdata_log = tmp_path / "userdata-calls.log"
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {
        "HOME": home,
        "TMPDIR": temp,
        "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "JUPYTER_PATH": kernels / "share" / "jupyter",
        setup_cell.ENV_VAR: requirement,
        "HF_HUB_OFFLINE": "1",
        "POSENC_CACHE_DIR": cache,
        "OMP_NUM_THREADS": "1",
        "FAKE_COLAB_USERDATA_LOG": userdata_log,
        OUTPUTS_ENV: outputs,
    }.items():
        monkeypatch.setenv(name, str(value))

    # The setup cell, as every chapter stores it, in the kernel where the chapters run.
    chapters = sorted((checkout / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert [p.name for p in chapters] == [p.name for p in setup_cell.chapters()]
    stored_setup = {nbformat.read(p, as_version=4).cells[0].source for p in chapters}
    assert stored_setup == {setup_cell.template()}
    t = time.monotonic()
    colab_at_start, _, where = _execute(
        checkout / "notebooks" / "_colab_setup.ipynb",
        [
            'import sys\nprint("google.colab" in sys.modules)',
            stored_setup.pop(),
            "import importlib.metadata, json, posenc\n"
            'print(json.dumps([posenc.__file__, importlib.metadata.version("posenc")]))',
        ],
        log=log,
    )
    timings["setup cell"] = time.monotonic() - t
    assert colab_at_start.strip() == "True"
    posenc_file, posenc_version = json.loads(where)
    assert Path(posenc_file).is_relative_to(env_dir), posenc_file
    assert wheel.name.startswith(f"posenc-{posenc_version}-")

    # What the test command does before the chapters: chapter 15's model converted once, here
    # by the environment's own transformers (each release keeps a copy of its own).
    t = time.monotonic()
    _check(
        _run([str(python), "-m", "posenc.data.smol"], log=log),
        "python -m posenc.data.smol (Colab's)",
    )
    timings["SmolLM2 converted by Colab's transformers"] = time.monotonic() - t

    t = time.monotonic()

    def nbval(paths, junit, workers):
        return _run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--nbval",
                "--nbval-kernel-name",
                KERNEL,
                "--nbval-sanitize-with",
                "tools/nbval_sanitize.cfg",
                "-p",
                "no:cacheprovider",
                "-p",
                "tests.test_colab_like",
                "-n",
                str(workers),
                "--dist",
                "loadfile",
                "-q",
                "--junitxml",
                str(junit),
                *[str(p.relative_to(checkout)) for p in paths],
            ],
            log=log,
            cwd=checkout,
            timeout=RUN_TIMEOUT_S,
        )

    junit = tmp_path / "junit.xml"
    run = nbval(chapters, junit, 2)
    results = _chapter_results(junit) if junit.exists() else {}
    # A chapter whose kernel never answered ran none of its cells (two kernels starting at
    # once can collide on jupyter_client's TCP ports): it runs again, alone, once. A chapter
    # that failed in any other way fails the test.
    failed = {name for name, r in results.items() if r["failed"]}
    unstarted = _unstarted(junit) if junit.exists() else set()
    if run.returncode != 0 and failed and failed <= unstarted:
        print("run again, their kernel having never answered:", sorted(failed))
        again = tmp_path / "junit-again.xml"
        run = nbval([p for p in chapters if p.name in failed], again, 0)
        results.update(_chapter_results(again) if again.exists() else {})
    timings["chapters"] = time.monotonic() - t

    for chapter in [p.name for p in chapters]:
        r = results.get(chapter, {})
        print(
            f"{chapter:40} {int(r.get('passed', 0)):3} passed {int(r.get('failed', 0)):2} failed"
            f" {int(r.get('skipped', 0)):2} skipped {r.get('seconds', 0.0):6.1f} s"
        )

    # the secret: read by nothing that ran, and found nowhere
    t = time.monotonic()
    chapters_read_secret = userdata_log.exists()
    recorded = [
        json.loads(line) for f in outputs.glob("*.jsonl") for line in f.read_text().splitlines()
    ]
    needles = [token, token.removeprefix("hf_")]
    in_outputs = [r["cell"] for r in recorded if any(n in json.dumps(r) for n in needles)]
    in_printed = sum(any(n in text for n in needles) for text in log)
    in_files = _files_holding(
        tmp_path, [n.encode() for n in needles], skip=checkout / "tests" / "fake_colab"
    )
    timings["secret scan"] = time.monotonic() - t

    # the secret is there to be read: the probe reads it, once not offline
    probe = _execute(
        checkout / "notebooks" / "_colab_secret.ipynb",
        [
            "import hashlib, os\nfrom posenc.data import llama\n"
            'os.environ.pop("HF_HUB_OFFLINE")\ntoken = llama._hf_token()\n'
            "print(token and hashlib.sha256(token.encode()).hexdigest())"
        ],
        log=log,
    )
    after = _installed(python, log)
    timings["total"] = time.monotonic() - started
    print("seconds:", {k: round(v) for k, v in timings.items()})

    assert changes == [], "the setup cell would change packages Colab has already imported"
    assert run.returncode == 0, (
        "chapters failed in the Colab-like environment:\n" + run.stdout[-20000:]
        if not any(n in run.stdout + run.stderr for n in needles)
        else "chapters failed (output not shown: it holds the token)"
    )
    assert set(results) == {p.name for p in chapters}
    assert all(r["failed"] == 0 and r["passed"] > 0 for r in results.values())
    for name, pin in pins.items():
        assert pin.specifier.contains(after[name]), f"the run changed {name} to {after[name]}"
    assert {name for name in after if name not in before} == {
        canonicalize_name(a.split()[0]) for a in additions
    }
    assert len(recorded) == sum(r["passed"] + r["failed"] for r in results.values())
    assert not in_outputs, in_outputs
    assert in_printed == 0
    assert in_files == [], in_files
    assert not chapters_read_secret, userdata_log.read_text()
    assert probe == [f"{hashlib.sha256(token.encode()).hexdigest()}\n"]
    assert userdata_log.read_text().split()[1:] == ["HF_TOKEN"]
