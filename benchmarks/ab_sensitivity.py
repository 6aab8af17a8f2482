"""How large a slowdown ``dsbench ab`` catches on this machine: its verdicts' statistical power.

Throwaway commits slow a benchmark's step (``--target``: AdamW at 1M parameters of the quick
suite, by default; every quick AdamW size; or the quick suite's 1024 GEMM) by known fractions of
its own time (0: an A/A, two commits with the same code); each is measured against its parent
with ``dsbench ab`` in its default design (block rounds until decided, at most 10 minutes, as
the [Note: the design of an A/B] in :mod:`dsbench.ab.plan` says) or the one the flags name
(``--launches``, ``--rounds N``, ``--max-time``), and the verdicts are the result, not a pass or
a fail. For each slowdown it prints whether every row was called worse and the minutes to that
verdict (the README example's question: ``make bench-power POWER_ARGS="--slowdowns 0.1
--target adamw"``, the Makefile's default). Run it with ``make bench-power`` (or, from the
checkout, ``python -m benchmarks.ab_sensitivity --slowdowns 0,0.02,0.1 --target gemm --launches
--rounds 16 --out DIR``); it writes ``power.json`` (one entry per slowdown and case: compare's
row, the rounds a side and the minutes it took; and per slowdown the summary) and each A/B's two
result files under ``DIR``.

The commits are made in a throwaway clone of the checkout's HEAD: a first commit wraps AdamW's
setup with a slowdown of fraction 0 (so both sides run the same wrapper), and one branch per
fraction changes only that fraction. With ``counted=True`` (the tests) the slowdown is counted
instead of measured: the timing core's clock becomes a counter that the step advances by a fixed
1 ms times (1 + fraction), so the verdicts do not depend on the machine at all.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
import time
from pathlib import Path

from dsbench import ab

CASE = r"adamw\[impl=torch,params=1000000\]"
"""The one case of the counted test (and of ``--target adamw1m``)."""
TARGETS = {
    # name: (module holding the benchmark, its object, the quick suite's cases it filters)
    "adamw": ("dsbench/suites/optim.py", "ADAMW", r"adamw\[impl=torch,"),
    "adamw1m": ("dsbench/suites/optim.py", "ADAMW", CASE),
    "gemm": ("dsbench/suites/gemm.py", "GEMM", r"gemm\[dtype=[a-z0-9]+,impl=torch,size=1024\]"),
}
"""What a slowdown can target: every torch AdamW size of the quick suite (1M, 4M, 16M), the 1M
one alone, or the quick suite's 1024 x 1024 x 1024 GEMM."""
FRACTION_LINE = "_POWER_FRACTION = {frac!r}"

SLOWDOWN = """

# Throwaway change for dsbench's power benchmark (benchmarks/ab_sensitivity.py): {obj}'s step
# slowed by a busy-wait of _POWER_FRACTION of its own time, or with _POWER_COUNTED its time
# counted on the timing core's clock (a counter: 1 ms x (1 + fraction) per step, 0.1 us per
# clock read).
_POWER_FRACTION = 0.0
_POWER_COUNTED = {counted!r}


def _power_slowed(setup):
    import time
    import types

    def wrapped(params, ctx):
        case = setup(params, ctx)
        fn = case.fn
        if _POWER_COUNTED:
            import dsbench.measure.timing

            clock = [0.0]

            def read():
                clock[0] += 1e-7
                return clock[0]

            timing = dsbench.measure.timing
            timing.time = types.SimpleNamespace(**{{**vars(time), "perf_counter": read}})

            def slow(*args):
                clock[0] += 1e-3 * (1 + _POWER_FRACTION)
        else:

            def slow(*args):
                t0 = time.perf_counter()
                fn(*args)
                end = time.perf_counter() + _POWER_FRACTION * (time.perf_counter() - t0)
                while time.perf_counter() < end:
                    pass

        case.fn = slow
        return case

    return wrapped


object.__setattr__({obj}, "setup", _power_slowed({obj}.setup))
"""


def _git(repo: Path, *args: str) -> None:
    ident = ("-c", "user.name=dsbench power", "-c", "user.email=power@dsbench.invalid")
    subprocess.run(["git", *ident, *args], cwd=repo, check=True, capture_output=True)


def branch(frac: float) -> str:
    return f"slow-{frac:g}".replace(".", "_")


def make_commits(
    source: Path, workdir: Path, fractions, *, counted: bool = False, target: str = "adamw1m"
) -> Path:
    """A clone of ``source``'s HEAD with the slowdown hook on ``target``'s benchmark (see
    :data:`TARGETS`) at fraction 0 committed on top, and a branch per fraction (:func:`branch`)
    whose one commit sets that fraction. Fraction 0's branch is an A/A: two commits, one code."""
    repo = workdir / "repo"
    subprocess.run(["git", "clone", "--quiet", "--shared", str(source), str(repo)], check=True)
    module, obj, _ = TARGETS[target]
    hook = repo / module
    hook.write_text(hook.read_text() + SLOWDOWN.format(counted=counted, obj=obj))
    _git(repo, "commit", "-qam", f"power: {obj} slowdown hook at fraction 0")
    _git(repo, "branch", "power-base")
    base = hook.read_text()
    zero, line = FRACTION_LINE.format(frac=0.0), FRACTION_LINE.format
    for frac in fractions:
        _git(repo, "checkout", "-q", "-B", branch(frac), "power-base")
        hook.write_text(base.replace(zero, line(frac=frac)))
        _git(repo, "commit", "--allow-empty", "-qam", f"power: {obj} slowed by {frac:g}")
    return repo


def measure(
    repo: Path, frac: float, rounds: int | None, out: Path, *extra: str, case: str = CASE
) -> list[dict]:
    """``dsbench ab`` of the fraction's commit against its parent, run from the clone (its own
    dsbench first on the import path), over the quick suite's cases matching ``case``, with
    ``rounds`` a side (None: until decided, ab's default) and ``extra`` arguments; compare's
    rows, as CSV fields, each with the rounds a side run, the A/B's minutes, its design
    (``blocks`` or ``launches``) and why it stopped (``decided``, ``max-time``, ``max-rounds``;
    ``rounds`` for a fixed count)."""
    out = out.resolve()
    side = ab.SideEnv("current", "current", sys.executable, repo)
    shim = ab.make_shim(repo, out / "shim")
    name = branch(frac)
    argv = [sys.executable, "-m", "dsbench", "ab", "--baseline", f"commit={name}~1",
            "--contender", f"commit={name}", "--suite", "quick", "--filter", case,
            *(["--rounds", str(rounds)] if rounds else []), "--out", str(out / "results"),
            "--format", "csv", *extra]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=repo, env=ab.side_environ(side, shim), capture_output=True,
                          text=True, timeout=3600)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"dsbench ab for slowdown {frac:g} failed: {proc.stderr.strip()[-500:]}")
    minutes = (time.perf_counter() - t0) / 60
    docs = [json.loads(p.read_text()) for p in sorted((out / "results").rglob("*.json"))]
    spread = launch_spread(docs)
    head = docs[0]["ab"]
    how = {"design": head.get("pairing") or "launches",
           "stopped": (head.get("sequential") or {}).get("stopped", "rounds")}  # fmt: skip
    return [{**row, "slowdown": frac, "rounds": head["rounds"], "minutes": minutes, **how,
             "spread": spread.get(row["benchmark"])}
            for row in csv.DictReader(io.StringIO(proc.stdout))]  # fmt: skip


def summary(frac: float, rows: list[dict]) -> dict:
    """One slowdown's A/B in a line's facts: rows called worse of all, minutes to the verdict,
    rounds a side, design and why it stopped."""
    worse = sum(r["change"] == "worse" for r in rows)
    head = rows[0] if rows else {}
    return {"slowdown": frac, "rows": len(rows), "worse": worse,
            "every_row_worse": bool(rows) and worse == len(rows),
            **{k: head.get(k) for k in ("minutes", "rounds", "design", "stopped")}}  # fmt: skip


def summary_line(s: dict) -> str:
    """``slowdown 0.1: worse on every row (3/3) in 4.2 min: blocks, 27 rounds a side, decided``"""
    every = "worse on every row" if s["every_row_worse"] else "not worse on every row"
    return (f"slowdown {s['slowdown']:g}: {every} ({s['worse']}/{s['rows']}) in "
            f"{s['minutes']:.1f} min: {s['design']}, {s['rounds']} rounds a side, "
            f"stopped: {s['stopped']}")  # fmt: skip


def launch_spread(docs: list[dict]) -> dict[str, float]:
    """Per case, how far its launches scatter: the larger side's standard deviation of the
    launches' values over their median, in % (what "launches spread by 7%" means)."""
    import statistics

    out: dict[str, float] = {}
    for doc in docs:
        for row in doc["benchmarks"]:
            values = row.get("launch_values") or []
            if len(values) >= 2 and statistics.median(values) > 0:
                pct = 100 * statistics.pstdev(values) / statistics.median(values)
                out[row["id"]] = max(out.get(row["id"], 0.0), pct)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.ab_sensitivity", description=__doc__.split("\n")[0]
    )
    p.add_argument(
        "--slowdowns",
        default="0.02,0.1,0.2",
        help="fractions, comma-separated; 0 is an A/A (two commits, one code)",
    )
    p.add_argument(
        "--target",
        choices=sorted(TARGETS),
        default="adamw1m",
        help="the cases slowed: adamw (1M, 4M, 16M), adamw1m, gemm (1024)",
    )
    p.add_argument("--rounds", type=int, default=None,
                   help="a fixed number of rounds a side (default: until decided)")  # fmt: skip
    p.add_argument("--out", type=Path, default=Path(ab.STATE_DIR) / "power")
    p.add_argument("--max-time", metavar="DURATION",
                   help="until decided: each A/B's time limit (default: ab's, 10m)")  # fmt: skip
    p.add_argument("--max-rounds", type=int, metavar="N",
                   help="until decided: at most N rounds a side (default: none)")  # fmt: skip
    design = p.add_mutually_exclusive_group()
    design.add_argument("--blocks", action="store_true",
                        help="block rounds (dsbench ab --blocks, its default)")  # fmt: skip
    design.add_argument("--launches", action="store_true",
                        help="launch rounds (dsbench ab --launches)")  # fmt: skip
    args = p.parse_args(argv)
    try:
        fractions = [float(x) for x in args.slowdowns.split(",")]
    except ValueError:
        p.error(f"--slowdowns takes fractions such as 0.02,0.1 (got {args.slowdowns!r})")
    if (args.rounds is not None and args.rounds < 2) or any(not 0 <= f < 10 for f in fractions):
        p.error("--rounds must be at least 2 and every slowdown in [0, 10)")
    if args.rounds is not None and (args.max_time or args.max_rounds):
        p.error("--rounds N is a fixed count; --max-time and --max-rounds belong to an A/B "
                "until decided (the default): give one of them")  # fmt: skip
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    repo = make_commits(ab.checkout_root(), args.out, fractions, target=args.target)
    extra = [*(["--max-time", args.max_time] if args.max_time else []),
             *(["--max-rounds", str(args.max_rounds)] if args.max_rounds else []),
             *(["--blocks"] if args.blocks else []),
             *(["--launches"] if args.launches else [])]  # fmt: skip
    case = TARGETS[args.target][2]
    rows, summaries = [], []
    for frac in fractions:
        got = measure(repo, frac, args.rounds, args.out / branch(frac), *extra, case=case)
        for row in got:
            row["interval"] = next((v for k, v in row.items() if k.endswith("% interval")), "")
            print(f"slowdown {frac:g}: {row['benchmark']} x{float(row['ratio']):.3f} "
                  f"{row['change']} ({row['rounds']} rounds a side, {row['minutes']:.1f} min)",
                  flush=True)  # fmt: skip
        rows += got
        summaries.append(summary(frac, got))
        print(summary_line(summaries[-1]), flush=True)
    (args.out / "power.json").write_text(
        json.dumps({"case": case, "rows": rows, "summaries": summaries}, indent=1)
    )
    from tabulate import tabulate

    keys = ("slowdown", "benchmark", "spread", "ratio", "interval", "change", "rounds", "minutes")
    print(tabulate([[r.get(k, "") for k in keys] for r in rows], headers=keys, floatfmt=".3g"))
    for s in summaries:
        print(summary_line(s))
    print(f"written: {args.out / 'power.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
