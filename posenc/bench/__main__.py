"""``python -m posenc.bench``: run the benchmark, print the table and the targets, write files."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence

import torch

from posenc.bench import _DTYPES, IMPLEMENTATIONS, default_config, quick_config, run
from posenc.bench.report import format_table, format_targets, target_report, write


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m posenc.bench",
        description="Time RoPE implementations against the copy bounds and transformers.",
    )
    p.add_argument("--quick", action="store_true", help="a small grid (seconds)")
    p.add_argument("--out", default="bench-results", help="output directory")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda if any")
    p.add_argument("--lengths", type=int, nargs="+", metavar="T", help="positions of the grid")
    p.add_argument("--dims", type=int, nargs="+", metavar="D", help="head sizes of the grid")
    p.add_argument(
        "--dtypes",
        nargs="+",
        choices=tuple(_DTYPES),
        metavar="DTYPE",
        help="float32, bfloat16, float16",
    )
    p.add_argument("--heads", type=int, help="heads H of q and k")
    p.add_argument(
        "--implementations",
        nargs="+",
        choices=IMPLEMENTATIONS,
        metavar="NAME",
        help=f"which to time, from: {', '.join(IMPLEMENTATIONS)}",
    )
    p.add_argument("--repeats", type=int, help="timed rounds at every point (median reported)")
    p.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
    p.add_argument(
        "--target-rounds",
        type=int,
        help="rounds of the focused measurement of the targets' shape on a CPU (0: skip)",
    )
    p.add_argument(
        "--keep-allocator", action="store_true", help="do not fix glibc's mmap threshold"
    )
    p.add_argument(
        "--peers",
        action="store_true",
        help="posenc beside Liger-Kernel, flash-attn and transformers, as a model calls them "
        "(posenc.bench.peers; on a GPU), and RoPE's share of a Llama-3-8B-shaped forward pass",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: run the grid, print the table and the targets, write the files.

    Args:
        argv: arguments (default: ``sys.argv[1:]``).

    Returns:
        0 (exit status).

    Raises:
        SystemExit: for bad arguments (argparse).

    Example:
        >>> import contextlib, io, tempfile
        >>> with contextlib.redirect_stdout(io.StringIO()) as out:
        ...     status = main(["--quick", "--lengths", "8", "--dtypes", "float32",
        ...                    "--implementations", "apply_rope", "--out", tempfile.mkdtemp()])
        >>> status, "rope_bench.json" in out.getvalue()
        (0, True)
    """
    args = _parser().parse_args(argv)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.peers:
        return _peers(device, args)
    config = quick_config(device) if args.quick else default_config(device)
    changes = {
        "lengths": tuple(args.lengths) if args.lengths else None,
        "dims": tuple(args.dims) if args.dims else None,
        "dtypes": tuple(args.dtypes) if args.dtypes else None,
        "heads": args.heads,
        "implementations": tuple(args.implementations) if args.implementations else None,
    }
    changes = {k: v for k, v in changes.items() if v is not None}
    if args.repeats:
        changes.update(repeats=args.repeats, min_repeats=args.repeats)
    if args.target_rounds is not None:
        changes["target_rounds"] = args.target_rounds
    if args.no_compile:
        impls = changes.get("implementations", config.implementations)
        changes["implementations"] = tuple(i for i in impls if i != "compiled")
    if args.keep_allocator:
        changes["fresh_memory"] = False
    config = dataclasses.replace(config, **changes)
    print(f"RoPE benchmark on {device}: [B={config.batch}, H={config.heads}, T, D] q and k")
    result = run(config, log=print)
    print(format_table(result))
    checks = target_report(result)
    if checks:
        print("\ntargets, [1, 32, 4096, 64] float32 on the CPU:")
        print(format_targets(checks))
    json_path, png_path = write(result, args.out)
    print(
        f"\n{len(result['rows'])} rows in {result['seconds']:.0f} s; wrote {json_path}, {png_path}"
    )
    return 0


def _peers(device: str, args) -> int:
    from posenc.bench import peers

    small = device != "cuda"  # on a CPU, a smoke run of the same code
    cases = peers.small_cases() if small else peers.CASES
    dtypes = tuple(args.dtypes) if args.dtypes else ("bfloat16", "float16", "float32")
    print(f"RoPE beside its peers on {device}: q [B, 32, T, D], k [B, 8, T, D]")
    backward = cases[0].name if small else "B=8, T=4k, D=128"
    # The targets' dtype first, then the model, then the rest, each written as it is done:
    # a run cut short keeps what the targets need.
    first = ("bfloat16",) if "bfloat16" in dtypes else dtypes[:1]
    rest = tuple(d for d in dtypes if d not in first)
    result = peers.run(device, cases=cases, dtypes=first, backward_case=backward, log=print)
    peers.write(result, args.out)
    tiny = dict(shape=peers.TINY_MODEL, prefill=((1, 64),), decode=(4, 63))
    try:
        result["model"] = peers.model_share(device, log=print, **(tiny if small else {}))
        for row in result["model"]:
            print(
                f"  {row['step']}: RoPE's share of the forward pass, transformers "
                f"{row['share_transformers']:.1%}, posenc {row['share_posenc']:.1%} "
                f"(one round's noise {row['share_noise']:.1%})"
            )
    except Exception as err:  # reported, and the grid above still stands
        result["model_error"] = f"{type(err).__name__}: {err}"
        print(f"model share not measured: {result['model_error']}")
    peers.write(result, args.out)
    if rest:
        more = peers.run(device, cases=cases, dtypes=rest, backward_case=backward, log=print)
        result["rows"] += more["rows"]
    checks = peers.targets(result)
    if checks:
        print("\ntargets, bfloat16, the model's layout:")
        print(peers.format_targets(checks))
    json_path, png_path = peers.write(result, args.out)
    print(f"wrote {json_path}, {png_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
