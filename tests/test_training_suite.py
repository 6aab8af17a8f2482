"""The training suite compares like with like: both engines on torch.distributed's collectives
and the same optimizer, dsbench's own collectives in their own rows (never DeepSpeed's), the three
rows of a (model, stage, kernels) interleaved, and every row naming what its engine really ran."""

import dataclasses
import json

import pytest

from dsbench.engines.deepspeed import deepspeed_version
from dsbench.measure import runner
from dsbench.suites.base import Benchmark, Context, case_id, record_of
from dsbench.suites.training import TRAINING

CPU = Context(device="cpu", backend="cpu", suite="training")
GPU = Context(device="cuda:0", backend="cuda", suite="training", device_count=8)
needs_deepspeed = pytest.mark.skipif(
    deepspeed_version() is None, reason="DeepSpeed not installed (make test installs it)"
)


def test_benchmark_keep_leaves_combinations_out_of_the_cases():
    bench = Benchmark(
        name="b",
        description="",
        grid=lambda suite, ctx: {"x": [1, 2], "y": ["a", "b"]},
        setup=lambda params, ctx: None,
        metrics=TRAINING.metrics,
        keep=lambda p: not (p["x"] == 2 and p["y"] == "b"),
    )
    assert bench.cases("quick", CPU) == [
        {"x": 1, "y": "a"}, {"x": 1, "y": "b"}, {"x": 2, "y": "a"}
    ]  # fmt: skip


@pytest.mark.parametrize("ctx", [CPU, GPU], ids=["cpu", "gpu"])
def test_deepspeed_only_ever_gets_native_collectives(ctx):
    cases = TRAINING.cases("training", ctx)
    pairs = {(c["engine"], c["comm"]) for c in cases}
    assert ("deepspeed", "shm") not in pairs
    assert all(c["comm"] == "native" for c in cases if c["engine"] == "deepspeed")
    expected = {("dsbench", "native"), ("deepspeed", "native")}
    assert pairs == (expected | {("dsbench", "shm")} if ctx is CPU else expected)
    assert len({case_id(TRAINING.name, c) for c in cases}) == len(cases)


def test_interleaved_groups_are_dsbench_native_deepspeed_native_dsbench_shm():
    assert TRAINING.interleave == ("engine", "comm")
    cases = TRAINING.cases("training", CPU)
    groups = runner.interleaved_groups(TRAINING, cases, 3)
    # one group per (model, stage, kernels): 2 models x 3 stages x 2 optimizer settings
    assert len(groups) == 12 and sum(len(g) for g in groups) == len(cases)
    for group in groups:
        sides = [(cases[i]["engine"], cases[i]["comm"]) for i in group]
        assert sides == [("dsbench", "native"), ("deepspeed", "native"), ("dsbench", "shm")]
        rest = {
            json.dumps({k: v for k, v in cases[i].items() if k not in ("engine", "comm")})
            for i in group
        }
        assert len(rest) == 1


def test_dsbench_gets_the_collectives_its_row_names():
    from dsbench.suites.training import case_kernels

    ops = ("allreduce", "reduce_scatter", "allgather")
    case = record_of(TRAINING, TRAINING.cases("training", CPU)[0])
    native = case_kernels(dataclasses.replace(case, comm="native", kernels="torch"), "cpu")
    assert native == {"adamw": "torch", **dict.fromkeys(ops, "native")}
    shm = case_kernels(dataclasses.replace(case, comm="shm", kernels="best"), "cpu")
    assert {op: shm[op] for op in ops} == dict.fromkeys(ops, "shm")
    assert shm["adamw"] == "torch"  # on CPUs: torch's fused AdamW (triton only interprets)


@pytest.mark.slow
@needs_deepspeed
def test_dsbench_computes_the_global_norm_every_step_as_deepspeed_does():
    """DeepSpeed's ZeRO optimizers compute the global gradient norm every step with clipping
    off; dsbench's engine does too with grad_norm_every_step (the suite's setting), the same
    value, and not without it."""
    from dsbench.procs.distributed import spawn_ranks

    got = {}
    spawn_ranks(
        "tests._training_workers:grad_norms",
        2,
        {"stages": [1, 2, 3]},
        on_message=lambda rank, msg: got.__setitem__(msg["stage"], msg),
        timeout_s=600,
    )
    assert sorted(got) == [1, 2, 3]
    for stage, norms in got.items():
        assert norms["dsbench_off"] is None, stage
        assert norms["deepspeed"] > 0, stage
        assert norms["dsbench"] == pytest.approx(norms["deepspeed"], rel=1e-4), stage


@pytest.mark.slow
@needs_deepspeed
def test_one_group_on_two_cpu_ranks_names_what_each_engine_ran():
    """The runner's rank worker on one real group (mlp, stage 1, torch's AdamW): three rows,
    each row's notes naming that engine's own collectives and optimizer."""
    from dsbench.hardware import get_profile
    from dsbench.measure.timing import TimingConfig
    from dsbench.procs.distributed import spawn_ranks

    cases = [
        c
        for c in TRAINING.cases("training", CPU)
        if c["model"] == "mlp" and c["stage"] == 1 and c["kernels"] == "torch"
    ]
    assert len(cases) == 3
    config = TimingConfig(
        warmup_s=0.0, min_warmup=1, min_reps=3, max_reps=6, budget_s=0.05, rounds=3
    )
    payload = {
        "benchmark": TRAINING.name,
        "cases": cases,
        "ctx": CPU,
        "profile": get_profile("cpu"),
        "config": config,
    }
    got = {}
    spawn_ranks(
        "dsbench.measure.runner:rank_worker",
        2,
        payload,
        on_message=lambda rank, msg: got.__setitem__(msg[0], msg[1]),
        timeout_s=600,
    )
    assert sorted(got) == [0, 1, 2]
    rows = {(r.params["engine"], r.params["comm"]): r.to_json() for r in got.values()}
    for row in rows.values():
        assert row["status"] == "ok", row
        assert row["timing"]["rounds"] == 3
        assert "grad_norm" in row["notes"] and "work_differences" in row["notes"]

    native = rows["dsbench", "native"]["notes"]
    ops = ("allreduce", "reduce_scatter", "allgather")
    assert native["kernels"] == {"adamw": "torch", **dict.fromkeys(ops, "native")}
    assert "torch.distributed" in native["collectives"] and "gloo" in native["collectives"]
    assert "shm" not in json.dumps(native)
    assert native["optimizer"]["fused"] is None
    assert "unfused" in native["optimizer"]["runs"]

    shm = rows["dsbench", "shm"]["notes"]
    assert shm["kernels"] == {"adamw": "torch", **dict.fromkeys(ops, "shm")}
    assert "shared-memory" in shm["collectives"]

    ds = rows["deepspeed", "native"]["notes"]
    assert ds["optimizer"]["class"] == "torch.optim.adamw.AdamW"
    assert ds["optimizer"]["fused"] is None and "unfused" in ds["optimizer"]["runs"]
    assert "DeepSpeedZeroOptimizer" in ds["optimizer"]["zero_wrapper"]
    assert "deepspeed.comm" in ds["collectives"] and "gloo" in ds["collectives"]
    assert ds["deepspeed"] == deepspeed_version()
    assert "kernels" not in ds  # dsbench's registry choices are not DeepSpeed's
    assert "shm" not in json.dumps(ds)

    # every row: this rank's compute-only floor, the efficiency against it, the step's phases
    for (engine, _), row in rows.items():
        floor = row["work"]["floor_s"]
        assert floor > 0 and row["notes"]["floor_ms"]["forward_backward"] > 0
        eff = row["metrics"]["step_efficiency"]["value"]
        # the median of floor / t is floor / items x the median of samples/s (items / t), exactly
        per_sample = floor / row["work"]["items"]
        assert eff == pytest.approx(per_sample * row["metrics"]["samples_per_s"]["value"])
        assert eff > 0
        phases = row["notes"]["phases_ms"]
        assert {"forward", "backward", "reduce_scatter", "optimizer", "allgather", "other"} <= (
            phases.keys()
        )
        assert phases["forward"] > 0 and phases["backward"] > 0
        if engine == "dsbench":  # its own waits and optimizer are measured
            assert phases["optimizer"] > 0 and phases["reduce_scatter"] > 0
            assert "note" not in phases
        else:
            assert "DeepSpeed does not report its waits" in phases["note"]


# ------------------------------------------------------------------------------ world size 1

ONE_GPU = Context(device="cuda:0", backend="cuda", suite="training", device_count=1)


def test_one_gpu_trains_on_one_rank_and_skips_collectives_saying_why(monkeypatch):
    """A one-GPU box: every training and offload row asks for 1 rank and is spawned; the
    collectives need 2 and are skipped before anything is spawned."""
    from dsbench.hardware import get_profile
    from dsbench.procs import distributed
    from dsbench.suites.comm import BENCHMARKS as COMM

    assert {c["ranks"] for c in TRAINING.cases("training", ONE_GPU)} == {1}
    spawned, rows = [], []
    monkeypatch.setattr(distributed, "spawn_ranks", lambda *a, **k: spawned.append(a[1]))
    monkeypatch.setattr(runner, "_fresh_memory", lambda *a: None)
    allreduce = next(b for b in COMM if b.name == "allreduce")
    cases = allreduce.cases("quick", ONE_GPU)
    runner.run_distributed(allreduce, cases, ONE_GPU, get_profile("cpu"), runner.TIMING["smoke"],
                           rows.append)  # fmt: skip
    assert spawned == [] and len(rows) == len(cases)
    rows = [r.to_json() for r in rows]
    assert {r["reason"] for r in rows} == {
        "allreduce needs at least 2 ranks; 1 requested (1 GPU(s) visible, one rank per GPU)"
    }
    dsbench_rows = [c for c in TRAINING.cases("training", ONE_GPU) if c["engine"] == "dsbench"]
    runner.run_distributed(TRAINING, dsbench_rows, ONE_GPU, get_profile("cpu"),
                           runner.TIMING["smoke"], rows.append)  # fmt: skip
    assert spawned == [1]


def test_deepspeed_rows_skip_without_spawning_where_it_is_not_installed(monkeypatch):
    from dsbench.engines import deepspeed
    from dsbench.hardware import get_profile
    from dsbench.procs import distributed

    spawned, rows = [], []
    monkeypatch.setattr(deepspeed, "deepspeed_version", lambda: None)
    monkeypatch.setattr(distributed, "spawn_ranks", lambda *a, **k: spawned.append(a[1]))
    cases = [c for c in TRAINING.cases("training", CPU) if c["engine"] == "deepspeed"]
    runner.run_distributed(TRAINING, cases, CPU, get_profile("cpu"), runner.TIMING["smoke"],
                           rows.append)  # fmt: skip
    assert spawned == [] and len(rows) == len(cases)
    rows = [r.to_json() for r in rows]
    assert {r["status"] for r in rows} == {"skipped"}
    assert all(r["reason"].startswith("DeepSpeed is not installed; ") for r in rows)
    assert all("\n" not in r["reason"] for r in rows)


@pytest.mark.slow
def test_one_cpu_rank_runs_training_and_offload_through_the_runner(monkeypatch):
    """`dsbench run --ranks 1` on a CPU: the code path a one-GPU box takes (one spawned rank,
    a process group of one), both engines where DeepSpeed is installed, offload included. (Each
    case's memory alone in fresh ranks is left to `make gpu-check-rehearsal`, which runs it.)"""
    from dsbench.hardware import get_profile
    from dsbench.suites.training import TRAINING_OFFLOAD

    monkeypatch.setattr(runner, "_fresh_memory", lambda *a: None)
    one = Context(device="cpu", backend="cpu", suite="training", ranks=1)
    rows = []
    for bench in (TRAINING, TRAINING_OFFLOAD):
        cases = [
            c
            for c in bench.cases("training", one)
            if c["model"] == "mlp" and c["stage"] == 3 and c["comm"] == "native"
            and c["kernels"] == "best" and c.get("offload", "optimizer") == "optimizer"
        ]  # fmt: skip
        assert {c["ranks"] for c in cases} == {1} and len(cases) == 2
        runner.run_distributed(bench, cases, one, get_profile("cpu"), runner.TIMING["smoke"],
                               rows.append)  # fmt: skip
    by = {(r.name, r.params["engine"]): r.to_json() for r in rows}
    assert len(by) == 4
    for (_, engine), row in by.items():
        if engine == "deepspeed" and deepspeed_version() is None:
            assert row["status"] == "skipped" and "not installed" in row["reason"]
            continue
        assert row["status"] == "ok", row
        assert row["notes"]["world_size"] == 1 and row["value"] > 0
        assert row["memory"]["host_peak_rss_bytes"] > 0
    assert "offload" in by[("train_step_offload", "dsbench")]["notes"]
