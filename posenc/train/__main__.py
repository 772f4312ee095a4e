"""``python -m posenc.train``: train every encoding on every task from every seed, write JSON."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from posenc.train.model import ENCODINGS
from posenc.train.run import Settings, grid
from posenc.train.tasks import TASKS


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m posenc.train",
        description="Train a small decoder with each positional encoding on tasks where "
        "position matters, and measure it at 1x, 2x and 4x its training length.",
    )
    p.add_argument(
        "--encodings",
        nargs="+",
        choices=ENCODINGS,
        default=list(ENCODINGS),
        metavar="NAME",
        help=f"which encodings (default: all of {', '.join(ENCODINGS)})",
    )
    p.add_argument(
        "--tasks",
        nargs="+",
        choices=tuple(TASKS),
        default=list(TASKS),
        metavar="TASK",
        help=f"which tasks (default: all of {', '.join(TASKS)})",
    )
    p.add_argument(
        "--seeds", nargs="+", type=int, default=[0, 1, 2], metavar="SEED", help="default: 0 1 2"
    )
    p.add_argument("--steps", type=int, default=Settings.steps, help="optimiser steps per run")
    p.add_argument(
        "--workers", type=int, default=None, help="runs at a time (default: one per CPU core)"
    )
    p.add_argument("--device", default="cpu", help="where the models train: cpu (default) or cuda")
    p.add_argument(
        "--out", default="train-results/grid.json", help="where to write the results (JSON)"
    )
    return p


def _commit() -> str | None:
    """The repository's commit, with ``-dirty`` when files differ from it (None outside git)."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


def _machine(device: str) -> dict[str, object]:
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": device,
    }
    if torch.device(device).type == "cuda":
        machine["gpu"] = torch.cuda.get_device_name(device)
    return machine


def _bar(done: int, total: int, run: dict) -> None:
    filled = round(30 * done / total)
    acc = " ".join(f"{k} {v:.2f}" for k, v in run["accuracy"].items())
    print(
        f"[{'#' * filled}{'.' * (30 - filled)}] {done}/{total}  {run['encoding']:10} "
        f"{run['task']:6} seed {run['seed']}: {acc}  ({run['seconds']:.0f} s)",
        file=sys.stderr,
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: run the grid, print each run's time, write the JSON.

    Args:
        argv: arguments (default: ``sys.argv[1:]``).

    Returns:
        0 (exit status).

    Raises:
        SystemExit: for bad arguments (argparse).
    """
    args = _parser().parse_args(argv)
    settings = dataclasses.replace(Settings(), steps=args.steps, device=args.device)
    commit = _commit()  # the code that runs: read before, as files may change meanwhile
    start = time.perf_counter()
    runs = grid(
        args.encodings, args.tasks, args.seeds, settings, workers=args.workers, progress=_bar
    )
    seconds = time.perf_counter() - start
    results = {
        "machine": _machine(settings.device),
        "commit": commit,
        "settings": dataclasses.asdict(settings),
        "encodings": args.encodings,
        "tasks": args.tasks,
        "seeds": args.seeds,
        "seconds": seconds,
        "runs": runs,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    for run in runs:
        print(f"{run['encoding']:10} {run['task']:6} seed {run['seed']}: {run['seconds']:5.1f} s")
    print(f"{len(runs)} runs in {seconds / 60:.1f} min; results in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
