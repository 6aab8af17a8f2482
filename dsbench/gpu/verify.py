"""GPU verification: build every kernel, check it against the torch reference, time them all.

    dsbench verify-gpu [--out results] [--quick]

On a CUDA (or ROCm) machine this, in order and within about 8 minutes:

1. builds/loads every registered implementation of ``adamw``, ``gemm`` and ``reduce_add``
   (the CUDA/HIP extension compiles here; Triton kernels JIT-compile on first call);
2. checks each against the torch reference on fresh random inputs with odd sizes
   (AdamW: 1,000,003-element flat buffer and a list of odd tensors, grads fp32/fp16/bf16,
   with and without the loss scaler's unscaling and an inf that must skip the step;
   GEMM: fp16 and bf16 at 127x65x33, 1000x1000x1000 and 4096^3; reduce_add: 1,000,003);
3. times them side by side with dsbench's timing core (device events, L2 flushed):
   a device-to-device copy (the measured bandwidth ceiling), AdamW at 64M and 256M
   parameters, GEMM at 4096^3 and 8192^3 in fp16 and bf16, reduce_add at 256M elements;
4. writes a dsbench result file (with the environment) and prints a short table last, with the
   kernels' goals as ratios measured in this one run: Triton Adam at >= 85% of the copy
   bandwidth and faster than torch's fused AdamW, Triton GEMM at >= 90% and CUDA GEMM at >= 50%
   of torch.matmul (cuBLAS / hipBLASLt).

The result file is written whatever stops the run: the environment is collected before any
kernel runs, each step appends to a :class:`Progress` as it completes, and an exception that
escapes a step (a sticky asynchronous CUDA fault, no matched hardware profile, Ctrl-C) becomes
a failed ``verify.run[impl=verify-gpu,case=<step> step]`` row after what completed.
"""

from __future__ import annotations

import dataclasses
import sys
import time
import traceback
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import torch

from dsbench.kernels import reference, registry
from dsbench.records import HIGHER, OK, UNSET, Row, Stats, value_or

if TYPE_CHECKING:
    from dsbench.hardware import Profile

DEVICE = "cuda"
"""Where to verify; ``--device cpu`` dry-runs the script's logic with the implementations
available on a CPU (the torch references), as the test suite does."""

TOL = {  # (dtype) -> (atol, rtol) for GEMM outputs with fp32 accumulation
    torch.float16: (2e-2, 1e-2),
    torch.bfloat16: (8e-2, 2e-2),
}


@dataclasses.dataclass
class Check:
    op: str
    impl: str
    case: str
    ok: bool
    detail: str = ""


@dataclasses.dataclass
class Progress:
    """What a run has completed; the result file is written from it whatever stops the run."""

    env: dict = dataclasses.field(default_factory=dict)
    """The environment report (collected before any kernel runs)."""
    step: str = "environment"
    """The step under way: ``environment``, ``checks``, then ``timing``."""
    checks: list[Check] = dataclasses.field(default_factory=list)
    build_s: dict[str, float] = dataclasses.field(default_factory=dict)
    """Seconds to build/load each ``<op>.<impl>``."""
    timed: list[Row] = dataclasses.field(default_factory=list)
    profile: Profile | None = None
    """The calibrated hardware profile of the timings, once the timing step has it."""

    def stopped(self, exc: BaseException) -> None:
        """Record what stopped the run in :attr:`step` as a failed check, after the others."""
        last = traceback.format_exception_only(type(exc), exc)[-1].strip() or type(exc).__name__
        self.checks.append(Check("run", "verify-gpu", f"{self.step} step", False, last))


def _worst(actual: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> str:
    diff = (actual.float() - expected.float()).abs()
    bad = diff > atol + rtol * expected.float().abs()
    nan = torch.isnan(actual).sum().item()
    return (
        f"{int(bad.sum())} of {bad.numel()} outside atol={atol:g} rtol={rtol:g}, "
        f"max |diff| {diff.max().item():.3g}, NaN {nan}"
    )


def _close(actual, expected, atol, rtol) -> tuple[bool, str]:
    ok = torch.allclose(actual.float(), expected.float(), atol=atol, rtol=rtol)
    return ok, "" if ok else _worst(actual, expected, atol, rtol)


# ------------------------------------------------------------------------------ correctness


def _adam_inputs(sizes, gdtype, scale, seed):
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    ps = [torch.randn(n, device=DEVICE, generator=g) for n in sizes]
    gs = [(torch.randn(n, device=DEVICE, generator=g) * scale).to(gdtype) for n in sizes]
    ms = [torch.randn(n, device=DEVICE, generator=g).abs() * 1e-3 for n in sizes]
    vs = [torch.randn(n, device=DEVICE, generator=g).abs() * 1e-6 for n in sizes]
    steps = [torch.full((), 3.0, device=DEVICE) for _ in sizes]
    return ps, gs, ms, vs, steps


def check_adamw(impl: str, fn) -> list[Check]:
    out = []
    hp = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01)
    layouts = {
        "flat 1,000,003": [1_000_003],
        "list of 37 odd tensors": [(i * 7919) % 70001 + 1 for i in range(37)],
    }
    for layout, sizes in layouts.items():
        for gdtype in (torch.float32, torch.float16, torch.bfloat16):
            for scaled, adamw_mode in ((False, True), (True, True), (False, False)):
                scale = 1024.0 if scaled else 1.0
                ref = _adam_inputs(sizes, gdtype, scale, seed=1)
                mine = [[t.clone() for t in lst] for lst in ref]
                gs_kw = {}
                if scaled:
                    gs_kw = dict(grad_scale=torch.tensor(scale, device=DEVICE))
                found_r, found_m = torch.zeros((), device=DEVICE), torch.zeros((), device=DEVICE)
                reference.adamw(*ref, **hp, adamw_mode=adamw_mode, found_inf=found_r, **gs_kw)
                fn(*mine, **hp, adamw_mode=adamw_mode, found_inf=found_m, **gs_kw)
                ok, detail = True, ""
                for name, a, b in zip(("p", "m", "v"), mine[:3], ref[:3], strict=True):
                    for x, y in zip(a, b, strict=True):
                        good, why = _close(x, y, atol=1e-5, rtol=1e-4)
                        if not good:
                            ok, detail = False, f"{name}: {why}"
                case = f"{layout}, grads {str(gdtype)[6:]}, " + (
                    "scaled" if scaled else "adamw" if adamw_mode else "adam-L2"
                )
                out.append(Check("adamw", impl, case, ok, detail))
    # an inf in the scaled gradients must skip the whole update
    ps, gs, ms, vs, steps = _adam_inputs([1_000_003], torch.float16, 1024.0, seed=2)
    gs[0][12345] = float("inf")
    before = [t.clone() for t in (*ps, *ms, *vs, *steps)]
    found = torch.zeros((), device=DEVICE)
    fn(ps, gs, ms, vs, steps, **hp, grad_scale=torch.tensor(1024.0, device=DEVICE), found_inf=found)
    after = (*ps, *ms, *vs, *steps)
    same = all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    out.append(
        Check(
            "adamw",
            impl,
            "inf in scaled grads skips the step",
            same and found.item() == 1.0,
            f"found_inf={found.item()} unchanged={same}",
        )
    )
    return out


def check_gemm(impl: str, fn) -> list[Check]:
    out = []
    g = torch.Generator(device=DEVICE).manual_seed(3)
    for dtype in (torch.float16, torch.bfloat16):
        shapes = ((127, 65, 33), (1000, 1000, 1000), (4096, 4096, 4096))
        for m, n, k in shapes if DEVICE == "cuda" else shapes[:1]:
            a = torch.randn(m, k, device=DEVICE, generator=g).to(dtype)
            b = torch.randn(k, n, device=DEVICE, generator=g).to(dtype)
            expected = (a.float() @ b.float()).to(dtype)
            atol, rtol = TOL[dtype]
            got = fn(a, b)
            ok, detail = _close(got, expected, atol * (k**0.5) / 8, rtol)
            out.append(Check("gemm", impl, f"{str(dtype)[6:]} {m}x{n}x{k}", ok, detail))
        bt = torch.randn(n, k, device=DEVICE, generator=g).to(dtype).t()  # non-contiguous B
        a = torch.randn(m, k, device=DEVICE, generator=g).to(dtype)
        ok, detail = _close(fn(a, bt), (a.float() @ bt.float()).to(dtype), 0.5, 2e-2)
        out.append(Check("gemm", impl, f"{str(dtype)[6:]} transposed B", ok, detail))
    return out


def check_reduce_add(impl: str, fn) -> list[Check]:
    out = []
    g = torch.Generator(device=DEVICE).manual_seed(4)
    for acc_dtype, x_dtype in (
        (torch.float32, torch.float16),
        (torch.float32, torch.bfloat16),
        (torch.float16, torch.float16),
        (torch.float32, torch.float32),
    ):
        acc = torch.randn(1_000_003, device=DEVICE, generator=g).to(acc_dtype)
        x = torch.randn(1_000_003, device=DEVICE, generator=g).to(x_dtype)
        expected = reference.reduce_add(acc.clone(), x)
        got = fn(acc.clone(), x)
        ok = torch.equal(got, expected)  # one fp32 rounding: bit-exact
        out.append(
            Check(
                "reduce_add",
                impl,
                f"{str(acc_dtype)[6:]} += {str(x_dtype)[6:]}",
                ok,
                "" if ok else _worst(got, expected, 0, 0),
            )
        )
    return out


CHECKS = {"adamw": check_adamw, "gemm": check_gemm, "reduce_add": check_reduce_add}


def verify(progress: Progress) -> None:
    """Check every registered implementation, appending to ``progress`` as each completes.

    Anything that goes wrong with one implementation (unavailable on the GPU, a failed build, an
    exception in a check, an asynchronous device fault that the closing synchronize reports) is
    a failed :class:`Check` for it, and the next implementation is checked.
    """
    for op, check in CHECKS.items():
        for name in registry.names(op):
            try:
                impl = registry.get(op, name)
                ok, why = impl.available("cuda" if DEVICE == "cuda" else "cpu")
                if not ok:
                    if DEVICE == "cuda":  # on the GPU machine every implementation must work
                        progress.checks.append(Check(op, name, "available", False, why))
                    continue
                t0 = time.perf_counter()
                fn = impl.load()
                if name == "cuda":  # build the extension now, so its time is reported
                    from dsbench.kernels.cuda.build import load

                    load()
                progress.build_s[f"{op}.{name}"] = time.perf_counter() - t0
                progress.checks.extend(check(name, fn))
                if DEVICE == "cuda":  # a fault of this implementation's kernels surfaces here
                    torch.cuda.synchronize()
            except Exception as exc:
                last = traceback.format_exception_only(type(exc), exc)[-1].strip()
                progress.checks.append(Check(op, name, "build/run", False, last))


# ------------------------------------------------------------------------------ timing


def timing_rows(quick: bool, progress: Progress) -> None:
    """Side-by-side timings through dsbench's suites and timing core under ``progress.env``,
    appended to ``progress.timed`` as each completes; ``progress.profile`` is the profile the
    environment matched, with measured ceilings filled in."""
    from dsbench.measure import runner
    from dsbench.suites import BENCHMARKS

    ctx = runner.context_for(progress.env, "full")
    progress.profile = runner.profile_for(progress.env, ctx)
    config = runner.TIMING["quick"]
    for name, params in timed_cases(quick):
        row = runner.run_case(BENCHMARKS[name], params, ctx, progress.profile, config)
        progress.timed.append(row)
        print(f"  timed {row.id}: {row.status} {value_or(row.value, row.message)}", flush=True)


def timed_cases(quick: bool) -> list[tuple[str, dict]]:
    """(benchmark, params) of every timing: copy, AdamW and GEMM for each implementation."""
    gpu = DEVICE == "cuda"  # a CPU dry run uses tiny sizes and the dtypes CPUs do well
    cases = [("copy", {"size": 2**30 if gpu else 2**26})]
    adam_sizes = ([64_000_000] if quick else [64_000_000, 256_000_000]) if gpu else [1_000_000]
    for n in adam_sizes:
        for impl in registry.names("adamw"):
            cases.append(("adamw", {"impl": impl, "params": n}))
        cases.append(("adamw", {"impl": "triton", "params": n, "scaler": True}))
    gemm_sizes = ([4096] if quick else [4096, 8192]) if gpu else [256]
    for dtype in ("float16", "bfloat16") if gpu else ("bfloat16",):
        for size in gemm_sizes:
            for impl in registry.names("gemm"):
                cases.append(("gemm", {"impl": impl, "dtype": dtype, "size": size}))
    return cases


@dataclasses.dataclass(frozen=True, kw_only=True)
class Timed:
    """A timing row as the goals read it: its case's parameters, typed (:func:`timed_cases`)."""

    name: str
    """``copy``, ``adamw`` or ``gemm``."""
    ok: bool
    value: float | None
    """The row's value where it is ok."""
    impl: str | None = None
    params: int | None = None
    """AdamW's parameter count."""
    dtype: str | None = None
    """GEMM's dtype."""
    size: int | None = None
    """The copy's bytes, GEMM's M = N = K."""

    @classmethod
    def of(cls, row: Row) -> Timed:
        p = row.params
        return cls(name=row.name, ok=row.ok, value=row.value if row.ok else None,
                   impl=p.get("impl"), params=p.get("params"), dtype=p.get("dtype"),
                   size=p.get("size"))  # fmt: skip


def _value(timed: list[Timed], **want) -> float | None:
    """The value of the first ok row whose fields are ``want``'s."""
    for t in timed:
        if t.ok and all(getattr(t, k) == v for k, v in want.items()):
            return t.value
    return None


def targets(rows: list[Row]) -> list[tuple[str, str, str]]:
    """The kernels' goals (see the module docstring) as ratios measured in this run."""
    out = []
    timed = [Timed.of(r) for r in rows]
    copy = next((t.value for t in timed if t.name == "copy" and t.ok), None)
    for n in sorted({t.params for t in timed if t.name == "adamw"}):
        tri = _value(timed, name="adamw", impl="triton", params=n)
        tor = _value(timed, name="adamw", impl="torch", params=n)
        if tri and copy:
            out.append(
                (f"Triton Adam {n / 1e6:.0f}M vs copy bandwidth", f"{tri / copy:.1%}", ">= 85%")
            )
        if tri and tor:
            out.append(
                (f"Triton Adam {n / 1e6:.0f}M vs torch fused AdamW", f"{tri / tor:.2f}x", "> 1")
            )
    for dtype in ("float16", "bfloat16"):
        for size in (4096, 8192):
            ref = _value(timed, name="gemm", impl="torch", dtype=dtype, size=size)
            for impl, goal in (("triton", ">= 90%"), ("cuda", ">= 50%")):
                mine = _value(timed, name="gemm", impl=impl, dtype=dtype, size=size)
                if ref and mine:
                    out.append(
                        (f"{impl} GEMM {dtype} {size}^3 vs torch.matmul", f"{mine / ref:.1%}", goal)
                    )
    return out


def run(*, out: str | None = None, quick: bool = False, device: str = "cuda") -> int:
    """``dsbench verify-gpu``: see the module docstring. ``out``: the results folder (None:
    ./results); ``quick``: fewer sizes; ``device``: ``cpu`` dry-runs it."""
    global DEVICE
    DEVICE = device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print(
            "verify_gpu: no CUDA/ROCm device visible to torch; nothing to verify", file=sys.stderr
        )
        return 2
    started = datetime.now(UTC)
    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (dry run)"
    print(f"device: {name}, torch {torch.__version__}", flush=True)
    from dsbench.envinfo import collect_env

    progress = Progress(env={"backend": _backend()})
    try:
        progress.env = collect_env(DEVICE, telemetry=False)
        progress.step = "checks"
        verify(progress)
        progress.step = "timing"
        timing_rows(quick, progress)
    except BaseException as exc:  # a sticky device fault, no matched profile, Ctrl-C
        progress.stopped(exc)
        if not isinstance(exc, Exception):
            finish(out, progress, started)
            raise
    return finish(out, progress, started)


def finish(out, progress: Progress, started: datetime) -> int:
    """Write the result file and print the report; the exit status: 1 if a check failed."""
    path = write_result(out, progress, started)
    print_report(progress.checks, progress.build_s, progress.timed)
    print(f"wrote {path} ({(datetime.now(UTC) - started).total_seconds():.0f} s)")
    return 1 if any(not c.ok for c in progress.checks) else 0


def _backend() -> str:
    if DEVICE != "cuda":
        return "cpu"
    return "rocm" if torch.version.hip else "cuda"


CHECK_ROW_ORDER = ("id", "name", "params", "status", "metric", "unit", "direction")
"""A check row's keys come in this order, then ``error`` or its value (as always written)."""


def check_rows(checks: list[Check]) -> list[Row]:
    """One row per correctness check, ``verify.<op>[impl=...,case=...]``: an ok row carries a
    value like every measurement (compare and publish read it): a passed check is 1."""
    from dsbench.stats import summarize

    passed = Stats.of(summarize([1.0]))
    return [
        Row(
            id=f"verify.{c.op}[impl={c.impl},case={c.case}]",
            name=f"verify.{c.op}",
            params={"impl": c.impl, "case": c.case},
            status=OK if c.ok else "failed",
            error=UNSET if c.ok else c.detail,
            metric="correct",
            unit="",
            direction=HIGHER,
            value=1.0 if c.ok else UNSET,
            samples=[1.0] if c.ok else UNSET,
            stats=passed if c.ok else UNSET,
            key_order=CHECK_ROW_ORDER,
        )
        for c in checks
    ]


def write_result(out, progress: Progress, started: datetime):
    """Write the run (timings, then checks, then what stopped it) as a dsbench result file;
    returns its path. A run stopped before its timings calibrated a profile records the detected
    profile's datasheet figures (``generic-gpu`` or ``cpu`` where none was detected)."""
    from dsbench import results

    profile = progress.profile or _detected_profile(progress.env)
    record = results.new_run_doc(
        suite="verify-gpu",
        label="verify-gpu",
        env=progress.env,
        profile=profile,
        rows=progress.timed + check_rows(progress.checks),
        started=started,
        argv=sys.argv[1:],
    )
    record = dataclasses.replace(record, build_seconds=progress.build_s)
    return results.write_run(record, root=out)


def _detected_profile(env: dict) -> Profile:
    from dsbench.hardware import get_profile

    detected = (env.get("profile") or {}).get("name")
    return get_profile(detected or ("cpu" if env.get("backend") == "cpu" else "generic-gpu"))


def print_report(checks: list[Check], build_s: dict[str, float], timed: list[Row]) -> None:
    """Checks passed per implementation, the failures, the timings and the goals."""
    from tabulate import tabulate

    summary = {}
    for c in checks:
        good, total = summary.get((c.op, c.impl), (0, 0))
        summary[c.op, c.impl] = (good + c.ok, total + 1)
    print(
        tabulate(
            [
                [op, impl, f"{g}/{t}", f"{build_s.get(f'{op}.{impl}', 0):.1f}"]
                for (op, impl), (g, t) in summary.items()
            ],
            headers=["op", "impl", "checks passed", "build/load s"],
        )
    )
    for c in checks:
        if not c.ok:
            print(f"FAILED {c.op}[{c.impl}] {c.case}: {c.detail}")
    print(
        tabulate(
            [
                [
                    r.id,
                    f"{r.value:.4g} {r.unit}" if r.ok else r.status,
                    f"{r.pct_of_peak:.1f}%" if r.pct_of_peak else "",
                ]
                for r in timed
            ],
            headers=["benchmark", "median", "% of peak"],
        )
    )
    print(tabulate(targets(timed), headers=["target", "measured", "goal"]))
