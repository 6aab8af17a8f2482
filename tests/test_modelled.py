"""Modelled numbers: roofline floors and alpha-beta estimates, checked against hand arithmetic
from the profiles' datasheet figures, and kept apart from measured numbers."""

import dataclasses
import math

import pytest

from dsbench import results
from dsbench.hardware import get_profile
from dsbench.publish.data import modelled
from dsbench.stats import summarize
from dsbench.suites import BENCHMARKS, Context, Work, case_id
from tests.conftest import make_doc, write_json

H100_FP16_TFLOPS = 989.4  # H100 SXM5 whitepaper, dense
H100_BW_GBPS = 3350
H100_LINK_GBPS = 450


def _row(name, params, *, seconds, work, metric, unit, value, direction="higher", peak=None):
    """An ok result row as the runner writes it (only the fields publish reads)."""
    samples = [value * f for f in (0.99, 1.0, 1.01)]
    return {
        "id": case_id(name, params),
        "name": name,
        "params": params,
        "status": "ok",
        "metric": metric,
        "unit": unit,
        "direction": direction,
        "value": value,
        "samples": samples,
        "stats": summarize(samples).to_dict(),
        "metrics": {metric: {"value": value, "unit": unit, "direction": direction}}
        | ({"throughput": {"value": value, "peak": {"kind": peak}}} if peak else {}),
        "work": dataclasses.asdict(work),
        "timing": {"summary": {"median": seconds}, "ranks": params.get("ranks", 1)},
    }


def _run(tmp_path, run_id, created, rows, profile):
    doc = make_doc(run_id, created, rows)
    doc["profile"] = {"name": profile}
    write_json(tmp_path / "box" / f"{run_id}.json", doc)
    return run_id


@pytest.fixture(scope="module")
def table():
    """The table without any result: the definitions' GPU-sized cases only."""
    return modelled.cross_profile_table([])


def test_table_profiles_exist():
    for name in modelled.TABLE_PROFILES:
        assert get_profile(name).name == name


def test_gemm_floor_is_2mnk_over_h100_fp16_peak(table):
    n = 8192
    cid = case_id("gemm", {"impl": "torch", "dtype": "float16", "size": n})
    expected_s = 2 * n**3 / (H100_FP16_TFLOPS * 1e12)
    assert expected_s > 3 * n * n * 2 / (H100_BW_GBPS * 1e9)  # compute-bound at this size
    assert table.loc[cid, ("h100-sxm", "modelled floor ms")] == pytest.approx(expected_s * 1e3)
    assert table.loc[cid, ("h100-sxm", "modelled floor value")] == pytest.approx(H100_FP16_TFLOPS)
    assert table.loc[cid, ("h100-sxm", "modelled limit")] == "compute (fp16_matrix)"
    assert table.loc[cid, ("counted work", "flops")] == 2 * n**3
    # bf16 uses the bf16 matrix peak, fp32 (on CPUs) the vector peak, not TF32
    fp32 = modelled.case_floor(
        "gemm", {"dtype": "float32", "size": n}, Work(flops=2 * n**3, bytes=12 * n * n), "h100-sxm"
    )
    assert fp32.seconds == pytest.approx(2 * n**3 / 66.9e12)
    assert fp32.limit == "compute (fp32)"


def test_small_gemm_on_a100_is_compute_bound_but_bytes_counted(table):
    n = 1024
    cid = case_id("gemm", {"impl": "torch", "dtype": "bfloat16", "size": n})
    t_compute, t_memory = 2 * n**3 / 312e12, 3 * n * n * 2 / 1555e9
    assert table.loc[cid, ("a100-40gb-sxm", "modelled floor ms")] == pytest.approx(
        max(t_compute, t_memory) * 1e3
    )
    assert "1555 GB/s" in table.loc[cid, ("a100-40gb-sxm", "modelled basis")]


@pytest.mark.parametrize("profile", modelled.TABLE_PROFILES)
def test_adamw_floor_is_28_bytes_per_param_over_bandwidth(table, profile):
    bw = get_profile(profile).memory_bandwidth_gbps.value
    n = 64_000_000
    for scaler, per_param in ((False, 28), (True, 32)):
        cid = case_id("adamw", {"impl": "torch", "params": n, "scaler": scaler})
        assert table.loc[cid, (profile, "modelled floor ms")] == pytest.approx(
            per_param * n / (bw * 1e9) * 1e3
        )
        # at the floor the primary metric (GB/s) is the bandwidth itself
        assert table.loc[cid, (profile, "modelled floor value")] == pytest.approx(bw)
        assert table.loc[cid, (profile, "modelled limit")] == "memory"


def test_allreduce_alpha_beta_by_hand(table):
    n, size = 8, 2**30
    cid = case_id("allreduce", {"impl": "native", "ranks": n, "dtype": "float32", "size": size})
    steps, per_rank = 2 * (n - 1), 2 * (n - 1) / n * size
    expected = steps * 0.47e-6 + per_rank / (H100_LINK_GBPS * 1e9)
    assert table.loc[cid, ("h100-sxm", "modelled floor ms")] == pytest.approx(expected * 1e3)
    assert table.loc[cid, ("h100-sxm", "modelled limit")] == "link"
    # busbw at the floor = 2(n-1)/n * S / t, just under the link rate because of alpha
    busbw = per_rank / expected / 1e9
    assert table.loc[cid, ("h100-sxm", "modelled floor value")] == pytest.approx(busbw)
    assert busbw < H100_LINK_GBPS
    # a 64 KiB all-reduce is latency-bound; AMD uses RCCL's alpha
    small = case_id("allreduce", {"impl": "native", "ranks": n, "dtype": "float32", "size": 2**16})
    assert table.loc[small, ("h100-sxm", "modelled limit")] == "latency"
    amd = steps * 2.3e-6 + 2 * (n - 1) / n * 2**16 / (200e9)
    assert table.loc[small, ("mi250x-gcd", "modelled floor ms")] == pytest.approx(amd * 1e3)
    assert "optimistic" in table.loc[small, ("mi250x-gcd", "modelled basis")]


def test_reduce_scatter_and_allgather_take_n_minus_1_steps():
    n, size = 4, 2**24
    for op in ("reduce_scatter", "allgather"):
        params = {"impl": "native", "ranks": n, "dtype": "float32", "size": size}
        floor = modelled.model_case(op, params, "a100-80gb-sxm")
        expected = (n - 1) * 0.47e-6 + (n - 1) / n * size / 300e9
        assert floor.seconds == pytest.approx(expected)


def test_mi300x_two_ranks_share_one_64_gbps_link():
    params = {"impl": "native", "ranks": 2, "dtype": "float32", "size": 2**30}
    floor = modelled.model_case("allreduce", params, "mi300x")
    assert floor.seconds == pytest.approx(2 * 2.3e-6 + 1.0 * 2**30 / 64e9)
    eight = modelled.model_case("allreduce", params | {"ranks": 8}, "mi300x")
    assert eight.seconds == pytest.approx(14 * 2.3e-6 + 1.75 * 2**30 / 448e9)


def test_training_is_not_modelled_and_says_why(tmp_path):
    params = {"model": "mlp", "engine": "dsbench", "stage": 1, "ranks": 2, "dtype": "float32"}
    row = _row("train_step", params, seconds=0.05, work=Work(flops=1e9, items=64),
               metric="samples_per_s", unit="samples/s", value=1280.0)  # fmt: skip
    _run(tmp_path, "20260101T000000Z-aaaaaa", "2026-01-01T00:00:00+00:00", [row], "h100-sxm")
    df = modelled.cross_profile_table(results.load_runs(tmp_path))
    cid = row["id"]
    assert df.loc[cid, ("case", "origin")] == "results"
    assert math.isnan(df.loc[cid, ("h100-sxm", "modelled floor ms")])
    assert df.loc[cid, ("h100-sxm", "modelled basis")].startswith("not modelled: ")
    # measured stays measured even where nothing is modelled
    assert df.loc[cid, ("h100-sxm", "measured ms")] == pytest.approx(50.0)
    assert math.isnan(df.loc[cid, ("h100-sxm", "measured efficiency")])
    assert "train_step" in df.attrs["not_modelled"]


def test_measured_efficiency_for_a_synthetic_h100_run(tmp_path):
    n = 8192
    params = {"impl": "torch", "dtype": "float16", "size": n}
    measured_s = 1.5e-3
    tflops = 2 * n**3 / measured_s / 1e12
    work = Work(flops=2.0 * n**3, bytes=3.0 * n * n * 2)
    row = _row("gemm", params, seconds=measured_s, work=work, metric="throughput",
               unit="TFLOP/s", value=tflops)  # fmt: skip
    other = _row("gemm", params, seconds=9.0, work=work, metric="throughput", unit="TFLOP/s",
                 value=0.12)  # fmt: skip
    _run(tmp_path, "20260101T000000Z-aaaaaa", "2026-01-01T00:00:00+00:00", [row], "h100-sxm")
    _run(tmp_path, "20260102T000000Z-bbbbbb", "2026-01-02T00:00:00+00:00", [other], "cpu")
    df = modelled.cross_profile_table(results.load_runs(tmp_path))
    cid = row["id"]
    floor_s = 2 * n**3 / (H100_FP16_TFLOPS * 1e12)
    h = df.loc[cid, "h100-sxm"]
    assert h["measured ms"] == pytest.approx(1.5)
    assert h["measured value"] == pytest.approx(tflops)
    assert h["measured efficiency"] == pytest.approx(floor_s / measured_s)
    assert h["measured efficiency"] == pytest.approx(tflops / H100_FP16_TFLOPS)
    assert h["measured run"] == "20260101T000000Z-aaaaaa"
    assert df.loc[cid, ("case", "origin")] == "definition+results"
    # the CPU run is not an H100 run and no TABLE_PROFILE column picks it up
    for p in modelled.TABLE_PROFILES:
        if p != "h100-sxm":
            assert math.isnan(df.loc[cid, (p, "measured ms")])
            assert df.loc[cid, (p, "measured run")] == ""


def test_newest_run_on_a_profile_wins(tmp_path):
    params = {"impl": "torch", "params": 16_000_000, "scaler": False}
    work = Work(bytes=28.0 * 16e6, items=16e6)
    old = _row("adamw", params, seconds=2e-4, work=work, metric="bandwidth", unit="GB/s", value=1)
    new = _row("adamw", params, seconds=1.6e-4, work=work, metric="bandwidth", unit="GB/s", value=2)
    _run(tmp_path, "20260101T000000Z-aaaaaa", "2026-01-01T00:00:00+00:00", [old], "h100-sxm")
    _run(tmp_path, "20260103T000000Z-cccccc", "2026-01-03T00:00:00+00:00", [new], "h100-sxm")
    df = modelled.cross_profile_table(results.load_runs(tmp_path))
    assert df.loc[old["id"], ("h100-sxm", "measured run")] == "20260103T000000Z-cccccc"
    assert df.loc[old["id"], ("h100-sxm", "measured ms")] == pytest.approx(0.16)


def test_modelled_and_measured_columns_never_mix(table, tmp_path):
    assert list(table.columns.names) == ["group", "field"]
    for profile in modelled.TABLE_PROFILES:
        fields = list(table[profile].columns)
        assert fields == list(modelled.COLUMNS_PER_PROFILE)
        assert all(f.startswith(("modelled ", "measured ")) for f in fields)
        # no result files: every measured cell is empty, every modelled one is a model
        for f in fields:
            column = table[(profile, f)]
            if f.startswith("measured "):
                assert (column == "").all() if f == "measured run" else column.isna().all()
    # adding a run changes measured cells only
    n = 4096
    params = {"impl": "torch", "dtype": "float16", "size": n}
    row = _row("gemm", params, seconds=2e-4, work=Work(flops=2.0 * n**3, bytes=6.0 * n * n),
               metric="throughput", unit="TFLOP/s", value=687.0)  # fmt: skip
    _run(tmp_path, "20260101T000000Z-aaaaaa", "2026-01-01T00:00:00+00:00", [row], "mi300x")
    with_run = modelled.cross_profile_table(results.load_runs(tmp_path))
    modelled_cols = [c for c in table.columns if c[1].startswith("modelled ")]
    assert with_run.loc[table.index, modelled_cols].equals(table[modelled_cols])
    assert not math.isnan(with_run.loc[row["id"], ("mi300x", "measured ms")])


def test_definition_cases_cover_every_countable_benchmark(table):
    countable = {name for name, b in BENCHMARKS.items() if b.work_of is not None}
    assert countable >= {"adamw", "copy", "gemm", "allreduce", "reduce_scatter", "allgather"}
    assert set(table[("case", "benchmark")]) == countable
    assert (
        table[("counted work", "ranks")][table[("case", "benchmark")] == "allreduce"] == 8
    ).all()
    assert table.attrs["assumptions"] and "nvidia" in table.attrs["alpha"]
    assert set(table.attrs["profiles"]) == set(modelled.TABLE_PROFILES)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("adamw", {"impl": "torch", "params": 1000, "scaler": True}),
        ("gemm", {"impl": "torch", "dtype": "float32", "size": 64}),
        ("copy", {"size": 4096}),
        ("prefill", {"model": "gpt-tiny", "batch": 1, "prompt": 8, "dtype": "float32"}),
        ("decode", {"model": "gpt-tiny", "batch": 2, "prompt": 8, "dtype": "float32"}),
    ],
)
def test_work_of_is_what_setup_counts(name, params):
    bench, ctx = BENCHMARKS[name], Context()
    case = bench.setup(params, ctx)
    try:
        assert bench.work_of(params, ctx) == case.work
    finally:
        if case.teardown:
            case.teardown()


def test_collective_work_of_matches_nccl_tests_factors():
    for op, factor in (("allreduce", 2 * 7 / 8), ("reduce_scatter", 7 / 8), ("allgather", 7 / 8)):
        params = {"impl": "native", "ranks": 8, "dtype": "float32", "size": 2**20}
        work = BENCHMARKS[op].work_of(params, modelled.DEFINITION_CONTEXT)
        assert work == Work(wire_bytes=2**20, busbw_factor=factor)


def test_roofline_ceilings_in_base_units():
    c = modelled.roofline_ceilings("h100-sxm")
    assert c["bandwidth_Bps"] == pytest.approx(3.35e12)
    assert c["peaks"]["fp16_matrix"] == pytest.approx(989.4e12)
    assert c["ridge_points"]["fp16_matrix"] == pytest.approx(989.4e12 / 3.35e12)
    assert "datasheet" in c["sources"]["bandwidth_Bps"].lower()
    gcd = modelled.roofline_ceilings(get_profile("mi250x-gcd"))
    assert "tf32_matrix" not in gcd["peaks"]
    assert "TF32" in gcd["not_available"]["tf32_matrix"]
    cpu = modelled.roofline_ceilings("cpu")  # measured figures, not calibrated in this process
    assert cpu["bandwidth_Bps"] is None and "bandwidth_Bps" in cpu["not_available"]


def test_roofline_points_place_kernels(tmp_path):
    n, p = 2048, 1_000_000
    gemm = _row("gemm", {"impl": "torch", "dtype": "bfloat16", "size": n}, seconds=0.04,
                work=Work(flops=2.0 * n**3, bytes=3.0 * n * n * 2), metric="throughput",
                unit="TFLOP/s", value=0.43, peak="flops:bfloat16")  # fmt: skip
    adamw = _row("adamw", {"impl": "torch", "params": p}, seconds=5e-4,
                 work=Work(bytes=28.0 * p, items=p), metric="bandwidth", unit="GB/s",
                 value=56.0)  # fmt: skip
    coll = _row("allreduce", {"impl": "native", "ranks": 2, "dtype": "float32", "size": 2**20},
                seconds=1e-3, work=Work(wire_bytes=2**20, busbw_factor=1.0), metric="busbw",
                unit="GB/s", value=1.0)  # fmt: skip
    _run(tmp_path, "20260101T000000Z-aaaaaa", "2026-01-01T00:00:00+00:00",
         [gemm, adamw, coll], "cpu")  # fmt: skip
    _run(tmp_path, "20260102T000000Z-bbbbbb", "2026-01-02T00:00:00+00:00", [gemm], "h100-sxm")
    runs = results.load_runs(tmp_path)
    points = {pt["name"]: pt for pt in modelled.roofline_points(runs, "cpu")}
    assert set(points) == {"gemm", "adamw"}  # collectives are not kernels on a roofline
    g, a = points["gemm"], points["adamw"]
    assert g["intensity"] == pytest.approx(2 * n**3 / (6 * n * n))
    assert g["achieved_flops_per_s"] == pytest.approx(2 * n**3 / 0.04)
    assert g["plot_flops_per_s"] == g["achieved_flops_per_s"]
    assert g["peak_key"] == "bf16_matrix" and g["measured"] is True
    assert g["run_id"] == "20260101T000000Z-aaaaaa"
    assert a["bandwidth_only"] and a["intensity"] == 0 and a["peak_key"] is None
    assert a["plot_intensity"] == modelled.PURE_BANDWIDTH_INTENSITY
    assert a["achieved_bytes_per_s"] == pytest.approx(28 * p / 5e-4)
    assert a["plot_flops_per_s"] == pytest.approx(28 * p / 5e-4 * modelled.PURE_BANDWIDTH_INTENSITY)
    assert [pt["run_id"] for pt in modelled.roofline_points(runs, "h100-sxm")] == [
        "20260102T000000Z-bbbbbb"
    ]
    assert modelled.roofline_points(runs, "mi300x") == []


def test_stored_profile_gives_calibrated_ceilings(tmp_path):
    stored = get_profile("h100-sxm").to_dict()
    doc = make_doc("20260101T000000Z-aaaaaa", "2026-01-01T00:00:00+00:00", [])
    doc["profile"] = stored
    write_json(tmp_path / "box" / "r.json", doc)
    profile = modelled.stored_profile(results.load_runs(tmp_path), "h100-sxm")
    assert profile is not None and profile.peak_tflops["fp16_matrix"].value == H100_FP16_TFLOPS
    assert modelled.stored_profile(results.load_runs(tmp_path), "mi300x") is None


def test_inference_parameter_counts_match_the_presets():
    """The inference definitions count work from GPT_PARAMS (no torch); each is the preset's own
    count, and every GPT preset is there."""
    from dsbench.models import MODELS
    from dsbench.suites import inference

    gpt = {name: p.num_params() for name, p in MODELS.items() if p.family == "gpt"}
    assert gpt == inference.GPT_PARAMS
