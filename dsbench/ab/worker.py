"""One side of a block round (``dsbench ab --blocks``): a resident process that sets up the
cases of a suite and times them in blocks when the coordinator says, so that the two sides take
turns within seconds ([Note: sides in turns]).

Run as ``python -m dsbench.ab.worker --suite S [--filter RE] --device D --out FILE`` under the
side's interpreter and import path. It reads one JSON command a line on stdin and answers each
with one JSON line on stdout (what the libraries print goes to stderr):

- at start, unasked: ``{"cases": [id, ...], "skipped": {id: why}}``, the cases it can time;
- ``{"op": "setup", "id": ID}``: set the case up and warm it up; ``{"per_call": seconds}``, or
  ``{"status": "skipped" | "failed", "why": ...}``;
- ``{"op": "block", "reps": N}``: N timed repetitions after two untimed ones (the timing core's
  own warm-up, so a block starts with the caches and threads its last block left to the other
  side); ``{"median": seconds}``;
- ``{"op": "done"}``: the case's row from its blocks (each block one in-launch round), torn down;
  ``{"op": "drop", "why": ...}``: torn down unmeasured (the other side could not set it up);
- ``{"op": "finish"}``: the run written to ``--out`` as ``dsbench run`` writes one; then exit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime

MULTI_RANK = (
    "block rounds time single-process cases; this one spawns ranks "
    "(run it in launch rounds: drop --blocks)"
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dsbench.ab.worker")
    p.add_argument("--suite", required=True)
    p.add_argument("--filter")
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    # stdout carries the protocol alone: what anything else prints goes to stderr
    reply_to = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def reply(obj: dict) -> None:
        reply_to.write(json.dumps(obj) + "\n")
        reply_to.flush()

    from dsbench import results, runner
    from dsbench.envinfo import collect_env
    from dsbench.memory import release_freed
    from dsbench.suites import Skip
    from dsbench.timing import measure, merge

    started = datetime.now(UTC)
    env = collect_env(runner.resolve_device(args.device))
    ctx = runner.context_for(env, args.suite)
    profile = runner.profile_for(env, ctx, measure=False)
    planned = {p.id: p for p in runner.plan(args.suite, ctx, args.filter)}
    rows = {
        pid: runner.status_row(p.bench, p.params, "skipped", MULTI_RANK)
        for pid, p in planned.items()
        if p.bench.ranks_param
    }
    reply({"cases": [pid for pid in planned if pid not in rows],
           "skipped": {pid: r.reason for pid, r in rows.items()}})  # fmt: skip
    case = current = None
    parts = []
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "setup":
            current, parts = planned[cmd["id"]], []
            try:
                case = current.bench.setup(current.params, ctx)
                warm = measure(case.fn, device=ctx.torch_device, args=case.args,
                               config=block_config(3))  # fmt: skip
                reply({"per_call": warm.summary.median})
            except Exception as exc:
                status = "skipped" if isinstance(exc, Skip) else "failed"
                why = str(exc) if status == "skipped" else runner.error_text(exc)
                rows[current.id] = runner.status_row(current.bench, current.params, status, why)
                case = teardown(case)
                reply({"status": status, "why": why})
        elif op == "block":
            m = measure(case.fn, device=ctx.torch_device, args=case.args,
                        config=block_config(int(cmd["reps"])))  # fmt: skip
            parts.append(m)
            reply({"median": m.summary.median})
        elif op == "done":
            rows[current.id] = runner.ok_row(current.bench, current.params, case, merge(parts),
                                             profile)  # fmt: skip
            case = teardown(case)
            release_freed(ctx.device)
            reply({"ok": True})
        elif op == "drop":
            rows[current.id] = runner.status_row(current.bench, current.params, "skipped",
                                                 f"not timed: {cmd['why']}")  # fmt: skip
            case = teardown(case)
            reply({"ok": True})
        elif op == "finish":
            record = runner.new_run_doc(
                suite=args.suite, label=None, env=env, profile=profile,
                rows=[rows[pid] for pid in planned if pid in rows], started=started,
            )  # fmt: skip
            results.write_run(record, path=args.out)
            reply({"ok": True})
            return 0
        else:
            raise ValueError(f"unknown command {op!r}")
    return 1  # stdin closed before "finish": the coordinator stopped


def block_config(reps: int):
    """Exactly ``reps`` timed repetitions after the two untimed calls every measurement makes."""
    from dsbench.timing import TimingConfig

    return TimingConfig(warmup_s=0.0, min_warmup=2, min_reps=reps, max_reps=reps, budget_s=0.0,
                        target_rel_ci=0.0)  # fmt: skip


def teardown(case) -> None:
    if case is not None and case.teardown is not None:
        case.teardown()


if __name__ == "__main__":
    sys.exit(main())
