"""Run a suite: benchmark definitions -> timing core -> rows of a result document.

Single-process benchmarks run here, one case at a time. Multi-rank benchmarks (collectives)
run in spawned ranks, one spawn per (benchmark, rank count), all sizes inside it. A case that
fails or is skipped becomes a row saying so; the others still run.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from dsbench.errors import UsageError
from dsbench.hardware.caches import Residency, last_level, residency
from dsbench.measure.memory import host_rss, release_freed
from dsbench.measure.timing import Measurement, TimingConfig, device_cache_levels, measure, merge
from dsbench.procs import host
from dsbench.records import (
    OK,
    UNSET,
    CountedWork,
    Memory,
    MetricValue,
    Notes,
    Peak,
    Round,
    Row,
    Stats,
    Timing,
    value_or,
)
from dsbench.stats import Summary, summarize
from dsbench.suites import BENCHMARKS, Benchmark, Case, Context, Skip, case_id
from dsbench.suites import ceilings as ceilings_mod

if TYPE_CHECKING:
    from dsbench.hardware import Profile

TIMING = {
    "smoke": TimingConfig(warmup_s=0.0, min_warmup=1, min_reps=8, max_reps=20, budget_s=0.05),
    "quick": TimingConfig(warmup_s=0.1, min_reps=15, max_reps=300, budget_s=2.0),
    "full": TimingConfig(warmup_s=0.2, min_reps=20, max_reps=1000, budget_s=3.0),
    "inference": TimingConfig(warmup_s=0.2, min_reps=20, max_reps=2000, budget_s=2.0),
    # Training: the engines (and dsbench's own collectives) alternate in 4 rounds inside one
    # launch (Benchmark.interleave); compare judges engine against engine over those rounds.
    "training": TimingConfig(
        warmup_s=0.3, min_warmup=3, min_reps=12, max_reps=240, budget_s=4.5, rounds=4
    ),
}


@dataclasses.dataclass(kw_only=True)
class Planned:
    bench: Benchmark
    params: dict

    @property
    def id(self) -> str:
        return case_id(self.bench.name, self.params)


def resolve_device(choice: str) -> str:
    """``--device``: ``auto`` as the GPU torch sees, else the CPU; ``cuda`` refused without one."""
    if choice == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            "--device cuda: no CUDA/ROCm device is visible to torch "
            f"(torch {torch.__version__}); use --device cpu or auto"
        )
    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return choice


def context_for(env: dict, suite: str, ranks: int | None = None) -> Context:
    """Where the cases run, from the environment report of the chosen device; ``ranks``: what
    every multi-rank benchmark spawns instead of its own choice."""
    gpu = env["backend"] in ("cuda", "rocm")
    return Context(
        device="cuda:0" if gpu else "cpu",
        backend=env["backend"],
        suite=suite,
        cpu_flags=tuple((env.get("cpu") or {}).get("flags") or ()),
        device_count=env.get("device_count", 0) if gpu else 0,
        llc_bytes=int((env.get("caches") or {}).get("last_level_bytes") or 0),
        ranks=ranks,
    )


def profile_for(
    env: dict, ctx: Context, warn: Callable[[str], None] | None = None, *, measure: bool = True
) -> Profile:
    """The hardware profile the environment report matched, with measured ceilings filled in
    from the calibration cache (measured now when it has none, unless ``measure`` is False)."""
    from dsbench import hardware

    detected = env.get("profile") or {}
    if detected.get("message") and warn is not None:
        warn(detected["message"])
    if not detected.get("name"):
        raise UsageError(detected.get("message") or "no hardware profile matched this device")
    return hardware.calibrate(hardware.get_profile(detected["name"]), ctx.device, measure=measure)


def plan(suite: str, ctx: Context, pattern: str | None = None) -> list[Planned]:
    """The cases of ``suite``, optionally only those whose id matches the regex ``pattern``."""
    cases = [
        Planned(bench=b, params=p)
        for b in BENCHMARKS.values()
        if suite in b.suites
        for p in b.cases(suite, ctx)
    ]
    if pattern is None:
        return cases
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"--filter '{pattern}' is not a valid regular expression: {exc}") from None
    chosen = [c for c in cases if rx.search(c.id)]
    if not chosen:
        raise UsageError(
            f"--filter '{pattern}' matches no benchmark in suite '{suite}'; "
            f"benchmarks: {', '.join(sorted({c.bench.name for c in cases}))}"
        )
    return chosen


# ---------------------------------------------------------------------------- rows


def ok_row(bench: Benchmark, params: dict, case: Case, m: Measurement, profile: Profile) -> Row:
    """A result row: the primary metric with its samples and statistics, secondary metrics,
    % of the profile's peak, the counted work, peak memory and the raw timing."""
    metrics: dict[str, tuple[MetricValue, list[float], Summary]] = {}
    res = case_residency(case, profile)
    notes = {**case.notes, "residency": res.to_dict()} if res is not None else case.notes
    for metric in bench.metrics:
        samples = [metric.value(case.work, t) for t in m.samples]
        s = summarize(samples)
        pct, peak = UNSET, UNSET
        if metric.peak:
            pct, peak = _pct_of_peak(s.median, metric.peak.format(**params), profile)
            if res is not None and not res.dram and metric.peak == "mem_bandwidth":
                pct, peak = None, dataclasses.replace(peak, value=None, na=res.text())
        entry = MetricValue(value=s.median, unit=metric.unit, direction=metric.direction,
                            ci99=[s.ci_low, s.ci_high], pct_of_peak=pct, peak=peak)  # fmt: skip
        metrics[metric.name] = (entry, samples, s)
    primary, p_samples, p_summary = metrics[bench.primary.name]
    return Row(
        id=case_id(bench.name, params),
        name=bench.name,
        params=params,
        status=OK,
        metric=bench.primary.name,
        unit=bench.primary.unit,
        direction=bench.primary.direction,
        value=p_summary.median,
        samples=p_samples,
        rounds=[Round(launch=0, n=n) for n in m.round_sizes],
        stats=Stats.of(p_summary),
        pct_of_peak=value_or(primary.pct_of_peak),
        peak=value_or(primary.peak),
        metrics={k: v[0] for k, v in metrics.items()},
        work=CountedWork(**dataclasses.asdict(case.work)),
        memory=Memory.from_json(m.memory) if isinstance(m.memory, dict) else m.memory,
        notes=Notes.from_json(notes),
        timing=Timing.from_json({k: v for k, v in m.to_dict().items() if k != "memory"}),
    )


def case_residency(case: Case, profile: Profile) -> Residency | None:
    """Where a memory-bound case's working set lives against this device's last-level cache
    (None for a case that counts none): a cache-resident or partly resident row has no share of
    the DRAM ceiling, only its label (:mod:`dsbench.hardware.caches`)."""
    if not case.work.working_set:
        return None
    levels = device_cache_levels(profile.backend != "cpu", profile)
    return residency(case.work.working_set, last_level(levels))


def _pct_of_peak(value: float, kind: str, profile: Profile) -> tuple[float | None, Peak]:
    """``value`` as a percentage of the profile's ``kind`` peak (None where it has no figure),
    and that peak."""
    fig = profile.peak(kind)
    peak = Peak(kind=kind, value=fig.value, unit=fig.unit, source=fig.source,
                measured=fig.measured, profile=profile.name)  # fmt: skip
    if fig.value:
        return 100.0 * value / fig.value, peak
    return None, dataclasses.replace(peak, na=fig.na or "no value")


def status_row(bench: Benchmark, params: dict, status: str, message: str) -> Row:
    """A row of a case that was not measured: ``failed`` (``error``), ``skipped`` or
    ``interrupted`` (``reason``)."""
    failed = status == "failed"
    return Row(
        id=case_id(bench.name, params),
        name=bench.name,
        params=params,
        status=status,
        error=message if failed else UNSET,
        reason=UNSET if failed else message,
        metric=bench.primary.name,
        unit=bench.primary.unit,
        direction=bench.primary.direction,
    )


def error_text(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


# ---------------------------------------------------------------------------- execution


def _time_case(
    case: Case,
    ctx: Context,
    config: TimingConfig,
    *,
    distributed: bool = False,
    since_rss: int | None = None,
    profiled: bool = False,
) -> tuple[Measurement, dict]:
    """Time a set-up case, run its profile when ``profiled``, and always tear it down: the one
    measure / profile / teardown sequence of every path (single process, ranks, memory pass).
    Returns the measurement and what the profile found."""
    found: dict = {}
    try:
        m = measure(case.fn, device=ctx.torch_device, args=case.args, config=config,
                    distributed=distributed, since_rss=since_rss)  # fmt: skip
        if profiled and case.profile is not None:
            found = case.profile()
    finally:
        if case.teardown is not None:
            case.teardown()
    return m, found


def run_case(
    bench: Benchmark, params: dict, ctx: Context, profile: Profile, config: TimingConfig
) -> Row:
    try:
        case = bench.setup(params, ctx)
        m, _ = _time_case(case, ctx, config)
        return ok_row(bench, params, case, m, profile)
    except Skip as exc:
        return status_row(bench, params, "skipped", str(exc))
    except Exception as exc:
        return status_row(bench, params, "failed", error_text(exc))
    finally:
        case = None
        if ctx.gpu:
            torch.cuda.empty_cache()


def setup_everywhere(
    bench: Benchmark, params: dict, ctx: Context
) -> tuple[Case | None, Row | None]:
    """Set the case up on every rank: (case, None), or (None, a skipped/failed row naming the
    first rank whose setup failed) when any rank could not, so that no rank starts timing alone."""
    import torch.distributed as dist

    try:
        case, problem = bench.setup(params, ctx), None
    except Exception as exc:
        case, problem = None, exc
    problems: list = [None] * ctx.world_size
    dist.all_gather_object(
        problems,
        None
        if problem is None
        else (
            "skipped" if isinstance(problem, Skip) else "failed",
            str(problem) if isinstance(problem, Skip) else error_text(problem),
        ),
    )
    bad = [(r, p) for r, p in enumerate(problems) if p is not None]
    if not bad:
        return case, None
    if case is not None and case.teardown is not None:
        case.teardown()
    rank, (status, msg) = bad[0]
    return None, status_row(
        bench, params, status, msg if status == "skipped" else f"rank {rank}: {msg}"
    )


def _released(*args) -> None:
    raise RuntimeError("this case was torn down after timing")


def interleaved_groups(bench: Benchmark, cases: list[dict], rounds: int) -> list[list[int]]:
    """Indices of ``cases`` in groups timed together: cases equal but for ``bench.interleave``
    parameters, when there are several rounds; otherwise one case per group."""
    if rounds <= 1 or not bench.interleave:
        return [[i] for i in range(len(cases))]
    groups: dict[tuple, list[int]] = {}
    for i, params in enumerate(cases):
        key = tuple(sorted((k, str(v)) for k, v in params.items() if k not in bench.interleave))
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def quiet_renamed_collectives() -> None:
    """torch 2.13 renamed the tensor collectives DeepSpeed's comm layer calls (``*_single``);
    the old names warn once per call, that is once per step."""
    import warnings

    warnings.filterwarnings("ignore", r".*is deprecated\. Please use .*_single", FutureWarning)


def rank_worker(payload: dict, *, device: str, send: Callable) -> None:
    """Runs on every spawned rank: each case is set up and timed on all ranks together; rank 0
    sends the row (samples are the slowest rank's, memory the largest rank's).

    Cases of one interleaved group (see ``Benchmark.interleave``) are timed in rounds, A B then
    B A and so on, each round a fresh setup with a share of the budget; their samples are pooled
    (:func:`dsbench.measure.timing.merge`). Memory is then the largest of the rounds' peaks."""
    import torch.distributed as dist

    from dsbench.procs.distributed import mark

    quiet_renamed_collectives()
    bench = BENCHMARKS[payload["benchmark"]]
    ctx = dataclasses.replace(
        payload["ctx"], device=device, rank=dist.get_rank(), world_size=dist.get_world_size()
    )
    cases, config = payload["cases"], payload["config"]
    groups = interleaved_groups(bench, cases, config.rounds)
    for g, group in enumerate(groups):
        rounds = config.rounds if len(group) > 1 else 1
        round_config = config.per_round() if rounds > 1 else config
        parts: dict[int, list[Measurement]] = {i: [] for i in group}
        counted: dict[int, Case] = {}
        final: dict[int, Row] = {}
        for r in range(rounds):
            for index in group if r % 2 == 0 else group[::-1]:
                if index in final:
                    continue
                mark(doing=f"timing {case_id(bench.name, cases[index])}")  # named if it dies
                since = host_rss()
                case, row = setup_everywhere(bench, cases[index], ctx)
                if row is not None:
                    final[index] = row
                    continue
                m, found = _time_case(case, ctx, round_config, distributed=True,
                                      since_rss=since, profiled=True)  # fmt: skip
                parts[index].append(m)
                # keep what the row needs, not the callable (it holds the model and engine)
                work = case.work
                if "floor_s" in found:  # the profile measured the work's compute-only floor:
                    # keep the least disturbed (smallest) over the rounds
                    before = counted[index].work.floor_s if index in counted else math.inf
                    work = dataclasses.replace(work, floor_s=min(before, found.pop("floor_s")))
                counted[index] = Case(fn=_released, work=work, notes=case.notes | found)
                del case
                release_freed(ctx.device)
        if g + 1 < len(groups):
            # From here a death fails the next case's row: every rank names that case before
            # rank 0's rows let the launcher report this group done (a rank killed while still
            # freeing this group was otherwise named with a case whose row had arrived).
            mark(doing=f"timing {case_id(bench.name, cases[groups[g + 1][0]])}")
            dist.barrier()
        for index in group:
            row = final.get(index) or ok_row(
                bench, cases[index], counted[index], merge(parts[index]), payload["profile"]
            )
            if ctx.rank == 0:
                send((index, row))
        counted.clear()


MEMORY_PASS = TimingConfig(warmup_s=0.0, min_warmup=2, min_reps=3, max_reps=3, budget_s=0.0)
"""Interleaved benchmarks' fresh-process memory pass: 2 warm-up calls, 3 measured."""


def memory_worker(payload: dict, *, device: str, send: Callable) -> None:
    """One case alone in freshly spawned ranks: the peak resident set (and device peaks) with
    nothing else in the process, and what the case added to the process as it started."""
    import torch.distributed as dist

    quiet_renamed_collectives()
    bench = BENCHMARKS[payload["benchmark"]]
    ctx = dataclasses.replace(
        payload["ctx"], device=device, rank=dist.get_rank(), world_size=dist.get_world_size()
    )
    since = host_rss()
    case, row = setup_everywhere(bench, payload["case"], ctx)
    if row is not None:
        return
    m, _ = _time_case(case, ctx, MEMORY_PASS, distributed=True, since_rss=since)
    if ctx.rank == 0:
        send(m.memory)


def _fresh_memory(bench, params, ctx, profile, nranks: int) -> dict | None:
    from dsbench.procs.distributed import RankFailure, spawn_ranks

    got: list[dict] = []
    try:
        spawn_ranks(
            "dsbench.measure.runner:memory_worker",
            nranks,
            {"benchmark": bench.name, "case": params, "ctx": ctx, "profile": profile},
            device_type="cuda" if ctx.gpu else "cpu",
            on_message=lambda rank, msg: got.append(msg),
            timeout_s=300,
        )
    except RankFailure:
        return None  # the timing launch reports the case's failure
    return got[0] if got else None


def cannot_spawn(bench: Benchmark, params: dict, ctx: Context, nranks: int) -> str | None:
    """Why a multi-rank case is skipped before anything is spawned, or None."""
    if nranks < bench.min_ranks:
        return f"{bench.name} needs at least {bench.min_ranks} ranks; {nranks} requested" + (
            f" ({ctx.device_count} GPU(s) visible, one rank per GPU)" if ctx.gpu else ""
        )
    if ctx.gpu and nranks > max(ctx.device_count, 1):
        return f"{nranks} ranks requested but {ctx.device_count} GPU(s) visible (one rank per GPU)"
    return bench.unavailable(params) if bench.unavailable else None


def run_distributed(
    bench: Benchmark,
    cases: list[dict],
    ctx: Context,
    profile: Profile,
    config: TimingConfig,
    on_row: Callable[[Row], None],
) -> None:
    from dsbench.procs.distributed import RankFailure, spawn_ranks

    by_ranks: dict[int, list[dict]] = {}
    for params in cases:
        by_ranks.setdefault(params[bench.ranks_param], []).append(params)
    for nranks, asked in by_ranks.items():
        group = []
        for params in asked:
            why = cannot_spawn(bench, params, ctx, nranks)
            if why:
                on_row(status_row(bench, params, "skipped", why))
            else:
                group.append(params)
        if not group:
            continue
        got: dict[int, Row] = {}
        # Interleaved benchmarks compare engines side by side: each case's memory is also taken
        # alone in fresh processes, where nothing earlier in the process blurs it.
        fresh = (
            [_fresh_memory(bench, params, ctx, profile, nranks) for params in group]
            if bench.interleave
            else []
        )

        shared = None if ctx.gpu else host.shared_cores(nranks)  # taskset -c 0: say so

        def receive(rank: int, msg, got=got, fresh=fresh, shared=shared) -> None:
            index, row = msg
            if shared and row.ok:
                notes = Notes.from_json({**row.notes.to_json(), "cores": shared})
                row = dataclasses.replace(row, notes=notes)
            if fresh and fresh[index] is not None and isinstance(row.memory, Memory):
                alone = Memory.from_json(fresh[index])
                memory = dataclasses.replace(row.memory, fresh_process=alone)
                row = dataclasses.replace(row, memory=memory)
            got[index] = row
            on_row(row)

        payload = {
            "benchmark": bench.name,
            "cases": group,
            "ctx": ctx,
            "profile": profile,
            "config": config,
        }
        budget = 120 + len(group) * (config.budget_s * 3 + 30 * max(1, config.rounds))
        try:
            spawn_ranks(
                "dsbench.measure.runner:rank_worker",
                nranks,
                payload,
                device_type="cuda" if ctx.gpu else "cpu",
                on_message=receive,
                timeout_s=budget,
            )
        except RankFailure as exc:
            for i, params in enumerate(group):
                if i not in got:
                    on_row(status_row(bench, params, "failed", str(exc)))


CEILING_BUDGET_S = {"smoke": 0.3, "quick": 1.5, "full": 3.0, "training": 1.5, "inference": 1.5}
"""Seconds each ceiling row (:mod:`dsbench.suites.ceilings`) is timed for, over all its slices."""
CEILING_MODES = ceilings_mod.CEILING_MODES


def ceiling_mode(suite: str, asked: str | None = None) -> str:
    """``asked``, else ``$DSBENCH_CEILINGS`` (``dsbench ab`` sets ``cached``: its verdicts are
    ratios of a side to the other, not shares of a peak), else ``run`` (``cached`` for smoke)."""
    mode = asked or os.environ.get("DSBENCH_CEILINGS") or ("cached" if suite == "smoke" else "run")
    if mode not in CEILING_MODES:
        raise UsageError(f"ceilings '{mode}' is not one of {', '.join(CEILING_MODES)}")
    return mode


# [Note: ceilings in slices]
# A share of peak is only as good as its ceiling, and a shared machine's ceiling moves within
# the hour. So the ceiling rows a run's benchmarks need (dsbench.suites.ceilings.needed) are
# timed in slices: one before each benchmark's cases and one after the last, each slice a
# fresh setup with an equal share of the ceiling's budget, their samples pooled as the rounds
# of an interleaved case are (dsbench.measure.timing.merge). The ceiling (a high quantile of the
# pooled rates, dsbench.suites.ceilings.CEILING_QUANTILE) then spans the run as the benchmarks do.


def run_suite(
    suite: str,
    ctx: Context,
    profile: Profile,
    *,
    pattern: str | None = None,
    config: TimingConfig | None = None,
    progress: Callable[[str, Row | None], None] | None = None,
    ceilings: str = "cached",
) -> tuple[list[Row], Profile]:
    """Run every case of ``suite``; returns the rows in plan order (then the ceiling rows when
    ``ceilings == "run"``, see [Note: ceilings in slices]) and the profile their shares of peak
    divide by (with this run's ceilings where it measured them)."""

    config = config or TIMING[suite]
    planned = plan(suite, ctx, pattern)
    rows: dict[str, Row] = {}
    progress = progress or (lambda case_id, row: None)

    def on_row(row: Row) -> None:
        rows[row.id] = row
        progress(row.id, row)

    benches = list(dict.fromkeys(p.bench for p in planned))
    kinds = [m.peak.format(**p.params) for p in planned for m in p.bench.metrics if m.peak]
    needed = ceilings_mod.needed(kinds, profile, suite, ctx) if ceilings == "run" else []
    slices = len(benches) + 1  # before each benchmark's cases, and after the last
    slice_config = TimingConfig(
        warmup_s=0.05,
        min_warmup=2,
        min_reps=max(2, 8 // slices + 1),
        budget_s=CEILING_BUDGET_S.get(suite, 1.5) / slices,
    )
    parts: list[list[Measurement]] = [[] for _ in needed]
    cases: dict[int, Case] = {}
    ceiling_rows: dict[int, Row] = {}

    def ceiling_slice() -> None:
        for i, (bench, params) in enumerate(needed):
            if i in ceiling_rows:
                continue
            progress(case_id(bench.name, params), None)
            try:
                case = bench.setup(params, ctx)
                m, _ = _time_case(case, ctx, slice_config)
                parts[i].append(m)
                cases[i] = Case(fn=_released, work=case.work, notes=case.notes)
            except Exception as exc:
                ceiling_rows[i] = status_row(bench, params, "failed", error_text(exc))
            finally:
                case = None
                release_freed(ctx.device)

    for bench in benches:
        ceiling_slice()
        cases_of = [p.params for p in planned if p.bench is bench]
        if bench.ranks_param:
            run_distributed(bench, cases_of, ctx, profile, config, on_row)
        else:
            for params in cases_of:
                progress(case_id(bench.name, params), None)
                on_row(run_case(bench, params, ctx, profile, config))
    ceiling_slice()
    for i, (bench, params) in enumerate(needed):
        if i not in ceiling_rows:
            ceiling_rows[i] = ok_row(bench, params, cases[i], merge(parts[i]), profile)
    out = [rows[p.id] for p in planned if p.id in rows]
    measured = [ceiling_rows[i] for i in range(len(needed))]
    if measured:
        found = ceilings_mod.ceilings_from(measured, slices)
        profile = ceilings_mod.profile_with(profile, found)
        out = ceilings_mod.apply(out, found, profile) + measured
    return out, profile
