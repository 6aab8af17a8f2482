"""Claim files: published tables to check. They load and validate, bad files are named and
skipped, and check() sets each claim beside measured ratios (from runs) with their 99% interval
and a decision (consistent / contradicted / not decided), modelled ratios (from profiles, which
decide nothing) or the `dsbench ab` command that would measure it — never treating a claim as a
result."""

import dataclasses
import math
from pathlib import Path

import pytest

from dsbench import results
from dsbench.errors import UsageError
from dsbench.publish.data import claims
from dsbench.stats import summarize
from tests.conftest import SHIPPED_CLAIMS, make_doc, write_json

SHIPPED = SHIPPED_CLAIMS  # the claim definitions dsbench ships: definitions, not results
SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"

GOOD = """\
schema = "dsbench-claims"
schema_version = 1
title = "测试表"
title_en = "test table"
language = "zh-CN"

[source]
file = "seed.txt"
section = "2.2"

[scenario]
hardware = "2 CPUs"

[[claims]]
id = "train"
label = "训练"
metric = "training throughput"
unit = "samples/s"
direction = "higher"
baseline = { label = "v0.18.3", text = "100 samples/sec", value = 100 }
contender = { label = "v0.18.4", text = "125 samples/sec", value = 125 }
claimed_change = "+25%"

[claims.dsbench]
benchmark = "train_step"
params = { engine = "deepspeed" }
metric = "samples_per_s"
baseline = "0.18.3"
contender = "0.18.4"
"""


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _train_row(params: dict, value: float, peak_bytes: int = 1000) -> dict:
    from dsbench.suites import case_id

    samples = [value * f for f in (0.99, 1.0, 1.01)]
    return {
        "id": case_id("train_step", params),
        "name": "train_step",
        "params": params,
        "status": "ok",
        "metric": "samples_per_s",
        "unit": "samples/s",
        "direction": "higher",
        "value": value,
        "samples": samples,
        "stats": summarize(samples).to_dict(),
        "metrics": {
            "samples_per_s": {"value": value, "unit": "samples/s", "direction": "higher"},
            "time": {"value": 64 / value * 1e3, "unit": "ms", "direction": "lower"},
        },
        "memory": {"device_peak_allocated_bytes": peak_bytes},
        "timing": {"summary": {"median": 64 / value}},
    }


def _launch_row(params: dict, launches: list[float], spread: float = 0.01, n: int = 3) -> dict:
    """A train_step row measured in several launches (as ``dsbench ab`` writes a side): each
    launch's ``n`` samples evenly within ±``spread`` of its value, ``rounds`` saying which launch
    each belongs to."""
    from dsbench.stats import centre

    steps = [2 * i / (n - 1) - 1 for i in range(n)]
    rounds = [[v * (1 + spread * x) for x in steps] for v in launches]
    row = _train_row(params, centre(rounds))
    row["samples"] = [x for r in rounds for x in r]
    row["rounds"] = [{"launch": i, "n": len(r)} for i, r in enumerate(rounds)]
    row["stats"] = summarize(row["samples"]).to_dict()
    return row


def _params(model: str, engine: str = "deepspeed") -> dict:
    return {"model": model, "engine": engine, "stage": 1, "ranks": 2, "dtype": "float32"}


def _runs(tmp_path: Path, sides: dict[str, list[dict]], env=None) -> list[results.Run]:
    for i, (label, rows) in enumerate(sides.items()):
        run_id = f"2026010{i + 1}T000000Z-{i:06d}"
        doc = make_doc(run_id, f"2026-01-0{i + 1}T00:00:00+00:00", rows, label=label,
                       env=(env or {}).get(label))  # fmt: skip
        write_json(tmp_path / "runs" / f"{run_id}.json", doc)
    return results.load_runs(tmp_path / "runs")


# --------------------------------------------------------------------------------------------
# Loading


def test_every_shipped_claim_file_loads():
    warnings = []
    loaded = claims.load_claims(SHIPPED, warn=warnings.append)
    assert warnings == []
    files = sorted(SHIPPED.glob("*.toml"))
    assert len(files) >= 4
    assert {Path(c.file).name for c in loaded} == {f.name for f in files}
    assert len({c.id for c in loaded}) == len(loaded)
    for claim in loaded:
        assert claim.source["file"] and claim.source["section"]
        assert claim.claimed_ratio is not None or claim.claimed_range or claim.baseline.text
        if SEEDS.is_dir():
            assert (SEEDS / claim.source["file"]).is_file(), claim.source["file"]
    # the transcribed numbers are the article's: 128 -> 138 samples/s is +7.8%
    bert = next(c for c in loaded if c.id.endswith("/bert-large-training"))
    assert (bert.baseline.value, bert.contender.value) == (128, 138)
    assert bert.claimed_change == "+7.8%"
    assert bert.claimed_ratio == pytest.approx(138 / 128)


def test_shipped_numbers_appear_in_the_seed_articles():
    if not SEEDS.is_dir():
        pytest.skip(f"seed articles not present at {SEEDS}")
    for claim in claims.load_claims(SHIPPED):
        text = (SEEDS / claim.source["file"]).read_text(encoding="utf-8")
        for side in (claim.baseline, claim.contender):
            if side.text and "..." not in side.text:
                assert side.text in text, (claim.id, side.text)
        if claim.quote:
            assert claim.quote in text, claim.id
        if claim.form in ("table", "list"):
            assert claim.label in text, claim.id


def test_ratio_from_values_and_qualifiers(tmp_path):
    path = _write(tmp_path, "a.toml", GOOD)
    (claim,) = claims.load_claim_file(path)
    assert claim.id == "a/train"
    assert claim.claimed_ratio == pytest.approx(1.25)
    assert claims.claimed_text(claim) == "claimed 1.25×"
    bound = dataclasses.replace(claim, contender=claims.ClaimSide("new", ">72h", 72.0, ">"))
    assert bound.claimed_ratio is None
    assert claims.claimed_text(bound) == "claimed ≥0.72×"
    spread = dataclasses.replace(
        claim,
        baseline=claims.ClaimSide("old", "±3GB", 3.0, "±"),
        contender=claims.ClaimSide("new", "±0.5GB", 0.5, "±"),
    )
    assert spread.claimed_ratio == pytest.approx(0.5 / 3)


BAD = {
    "not TOML": ("schema = ", "not valid TOML"),
    "wrong schema": (GOOD.replace('"dsbench-claims"', '"other"'), "schema"),
    "missing title": (GOOD.replace('title = "测试表"\n', ""), "title: missing"),
    "bad direction": (GOOD.replace('direction = "higher"', 'direction = "up"'), "direction"),
    "unknown benchmark": (GOOD.replace('"train_step"', '"trian_step"'), "benchmark"),
    "unknown param": (GOOD.replace("engine = ", "engin = "), "params.engin"),
    "bad selector": (GOOD.replace('baseline = "0.18.3"', 'baseline = "pythn=3.11"'),
                     "dsbench.baseline: bad selector: unknown selector key 'pythn'"),
    "value not a number": (GOOD.replace("value = 100", 'value = "100"'), "baseline.value"),
    "no claims": (GOOD.split("[[claims]]")[0], "claims"),
    "unknown field": (GOOD.replace('unit = "samples/s"', 'unit = "samples/s"\nunits = "x"'),
                      "units: unknown field"),
    "both ways": (GOOD.replace('metric = "samples_per_s"', 'not_measurable = "why"'),
                  "not allowed together with 'not_measurable'"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_file_is_named_and_skipped(tmp_path, case):
    text, problem = BAD[case]
    _write(tmp_path, "a-good.toml", GOOD)
    bad = _write(tmp_path, "b-bad.toml", text)
    warnings = []
    loaded = claims.load_claims(tmp_path, warn=warnings.append)
    assert [c.id for c in loaded] == ["a-good/train"]
    assert len(warnings) == 1
    assert str(bad) in warnings[0] and problem in warnings[0]
    assert "\n" not in warnings[0]
    with pytest.raises(claims.ClaimError) as info:
        claims.load_claim_file(bad)
    assert isinstance(info.value, UsageError)  # the CLI prints it in one line and exits 2
    assert str(info.value).startswith(f"{bad}: ")


def test_results_loader_never_reads_claims(tmp_path):
    _write(tmp_path / "claims", "a.toml", GOOD)
    doc = make_doc("20260101T000000Z-aaaaaa", "2026-01-01T00:00:00+00:00", [])
    write_json(tmp_path / "claims" / "looks-like-a-run.json", doc)
    assert results.load_runs(tmp_path) == []
    assert [c.id for c in claims.load_claims(tmp_path / "claims")] == ["a/train"]


# --------------------------------------------------------------------------------------------
# Checking


def test_check_gives_measured_ratio_from_synthetic_runs(tmp_path):
    (claim,) = claims.load_claim_file(_write(tmp_path, "a.toml", GOOD))
    runs = _runs(
        tmp_path,
        {
            "0.18.3": [
                _train_row(_params("mlp"), 90.0),
                _train_row(_params("bert-tiny"), 40.0),
                _train_row(_params("mlp", "dsbench"), 500.0),
            ],
            "0.18.4": [
                _train_row(_params("mlp"), 99.0),
                _train_row(_params("bert-tiny"), 50.0),
                _train_row(_params("mlp", "dsbench"), 900.0),
            ],
        },
    )
    (entry,) = claims.check([claim], runs)
    assert entry.kind == "measured"
    measured = entry.measured
    assert measured["n_cases"] == 2  # the dsbench-engine rows are not engine=deepspeed
    assert sorted(p["ratio"] for p in measured["cases"]) == pytest.approx([1.1, 1.25])
    assert entry.dsbench_ratio == pytest.approx(math.sqrt(1.1 * 1.25))
    assert measured["baseline_run"] != measured["contender_run"]
    # two separate single-launch runs and no noise figure: no interval, nothing decided
    assert entry.decision == "not decided" and entry.interval is None
    assert entry.verdict.startswith(
        f"not decided: measured {math.sqrt(1.1 * 1.25):.3g}× (geometric mean of 2 cases; no "
        "interval: too few samples"
    )
    assert "vs claimed 1.25× (accepted 1.19–1.31×)" in entry.verdict
    # the claim's own numbers stay under "claimed"; nothing of them leaks into measured
    assert entry.claimed["baseline"]["value"] == 100
    assert sorted(p["baseline"] for p in measured["cases"]) == [40.0, 90.0]
    assert entry.modelled is None
    ab = (
        "dsbench ab --baseline deepspeed=0.18.3 --contender deepspeed=0.18.4 --suite training "
        "--filter '^train_step\\['"
    )
    assert entry.commands == [ab]
    assert entry.verdict.endswith(f"; to decide it: {ab}")


def _decided(tmp_path, base: list[float], cont: list[float], spread=0.01, n_cases=1):
    (claim,) = claims.load_claim_file(_write(tmp_path, "a.toml", GOOD))
    models = ["mlp", "bert-tiny", "gpt-tiny"][:n_cases]
    runs = _runs(
        tmp_path,
        {"0.18.3": [_launch_row(_params(m), base, spread) for m in models],
         "0.18.4": [_launch_row(_params(m), cont, spread) for m in models]},
    )  # fmt: skip
    (entry,) = claims.check([claim], runs)
    return entry, runs


@pytest.mark.parametrize(
    ("cont", "decision"),
    [
        ([125.0, 124.0, 126.0, 125.5, 124.5, 125.0], "consistent"),  # 1.25x, tight
        ([101.0, 100.0, 99.0, 100.5, 99.5, 100.0], "contradicted"),  # 1.00x, tight
        ([125.0, 95.0, 150.0, 110.0, 140.0, 125.0], "not decided"),  # 1.24x, wide
    ],
)
def test_claim_decision_from_the_interval_over_launches(tmp_path, cont, decision):
    """Six launches a side: the interval exists, and the claim (1.25x, accepted 1.19-1.31x) is
    consistent when it lies within, contradicted when wholly outside, else not decided."""
    base = [100.0, 99.0, 101.0, 100.5, 99.5, 100.0]
    entry, _ = _decided(tmp_path, base, cont)
    lo, hi = entry.interval
    assert lo <= entry.dsbench_ratio <= hi
    assert entry.accepted == pytest.approx((1.25 / 1.05, 1.25 * 1.05))
    assert entry.decision == decision
    assert entry.verdict.startswith(f"{decision}: measured ")
    assert f"99% interval {lo:.3g}×–{hi:.3g}×, 1 case" in entry.verdict
    assert ("to decide it: dsbench ab " in entry.verdict) == (decision == "not decided")


def test_a_claim_over_rows_with_peak_memory_judges_its_own_metric(tmp_path):
    """Rows measured alone in fresh ranks per launch (a sweep's sides) get a peak-memory row
    from compare beside each timing row; the throughput claim still takes its own rows' intervals
    (publishing the 12-06 release series raised here before)."""
    (claim,) = claims.load_claim_file(_write(tmp_path, "a.toml", GOOD))
    sides = {}
    for label, values in (("0.18.3", [100.0, 99.0, 101.0, 100.5, 99.5, 100.0]),
                          ("0.18.4", [125.0, 124.0, 126.0, 125.5, 124.5, 125.0])):  # fmt: skip
        row = _launch_row(_params("mlp"), values)
        row["launch_memory"] = [{"host_peak_rss_bytes": 2**30,
                                 "fresh_process": {"host_peak_rss_bytes": 2**29}}] * 6  # fmt: skip
        sides[label] = [row]
    (entry,) = claims.check([claim], _runs(tmp_path, sides))
    assert entry.decision == "consistent" and entry.interval is not None


def test_geometric_mean_interval_is_bonferroni_conservative(tmp_path):
    """Over n cases: each case's interval at 1 - 0.01/n, then the geometric means of the ends;
    it holds the geometric mean ratio and is wider than the cases' own 99% intervals' mean."""
    from dsbench import compare

    base, cont = [100.0, 98.0, 103.0, 101.0, 99.0], [124.0, 127.0, 123.0, 126.0, 125.0]
    entry, runs = _decided(tmp_path, base, cont, spread=0.02, n_cases=3)
    m = entry.measured
    assert m["n_cases"] == 3 and m["case_level"] == pytest.approx(1 - 0.01 / 3)
    rows = {r.id: r for r in compare.compare_rows(
        runs[0].rows, runs[1].rows, level=1 - 0.01 / 3)}  # fmt: skip
    for case in m["cases"]:
        assert (case["low"], case["high"]) == pytest.approx((rows[case["id"]].low,
                                                              rows[case["id"]].high))  # fmt: skip
    lo, hi = entry.interval
    assert lo == pytest.approx(math.exp(sum(math.log(c["low"]) for c in m["cases"]) / 3))
    assert hi == pytest.approx(math.exp(sum(math.log(c["high"]) for c in m["cases"]) / 3))
    plain = compare.compare_rows(runs[0].rows, runs[1].rows)  # 99% per case
    assert hi - lo > sum(r.high - r.low for r in plain) / 3


def test_noise_figure_and_ab_pair_give_single_launch_runs_an_interval(tmp_path):
    """A noise calibration of the machine lends single-launch runs an interval; a pair that
    `dsbench ab` measured together is preferred over newer runs measured apart."""
    (claim,) = claims.load_claim_file(_write(tmp_path, "a.toml", GOOD))
    _runs(
        tmp_path,
        {"0.18.3": [_launch_row(_params("mlp"), [100.0], n=10)],
         "0.18.4": [_launch_row(_params("mlp"), [125.0], n=10)]},
    )  # fmt: skip
    noise = make_doc("20260110T000000Z-noise0", "2026-01-10T00:00:00+00:00",
                     [_launch_row(_params("mlp"), [100.0, 100.5, 99.5, 100.2, 99.8])])  # fmt: skip
    noise["purpose"] = "noise"
    write_json(tmp_path / "runs" / "noise.json", noise)
    runs = results.load_runs(tmp_path / "runs")
    (entry,) = claims.check([claim], runs)
    assert entry.interval is not None and entry.decision == "consistent"
    assert entry.measured["baseline_run"] not in ("20260110T000000Z-noise0",)

    for k, (ds, values) in enumerate((("0.18.3", [100.0] * 4), ("0.18.4", [100.0] * 4))):
        doc = make_doc(f"2026010{k + 5}T000000Z-ab{k:04d}", f"2026-01-0{k + 5}T00:00:00+00:00",
                       [_launch_row(_params("mlp"), values)], label=f"ab-{ds}",
                       env={"packages": {"torch": "2.13.0+cpu", "deepspeed": ds}})  # fmt: skip
        doc["ab"] = {"id": "ab1", "side": ("baseline", "contender")[k],
                     "spec": f"deepspeed={ds}"}  # fmt: skip
        write_json(tmp_path / "runs" / f"ab{k}.json", doc)
    later = make_doc("20260120T000000Z-late00", "2026-01-20T00:00:00+00:00",
                     [_train_row(_params("mlp"), 300.0)], label="0.18.4")  # fmt: skip
    write_json(tmp_path / "runs" / "late.json", later)
    (entry,) = claims.check([claim], results.load_runs(tmp_path / "runs"))
    m = entry.measured
    assert (m["baseline_run"], m["contender_run"]) == (
        "20260105T000000Z-ab0000", "20260106T000000Z-ab0001")  # fmt: skip
    assert any("measured together by dsbench ab ab1" in n for n in m["notes"])
    assert entry.decision == "contradicted"  # 1.00x, tight, against 1.19-1.31x


def test_accepted_range_and_decide():
    (claim,) = claims.load_claim_file(_write_tmp_good())
    assert claims.accepted_range(claim) == pytest.approx((1.25 / 1.05, 1.25 * 1.05))
    ranged = dataclasses.replace(claim, claimed_range=(0.98, 1.02))
    assert claims.accepted_range(ranged) == (0.98, 1.02)  # a printed range as it stands
    bound = dataclasses.replace(claim, contender=claims.ClaimSide("new", ">72h", 72.0, ">"))
    assert claims.accepted_range(bound) == pytest.approx((0.72 / 1.05, math.inf))
    accepted = (0.98, 1.02)
    assert claims.decide((0.99, 1.01), accepted)[0] == "consistent"
    assert claims.decide((1.03, 1.10), accepted)[0] == "contradicted"
    assert claims.decide((0.90, 0.97), accepted)[0] == "contradicted"
    assert claims.decide((1.00, 1.05), accepted)[0] == "not decided"
    assert claims.decide((None, None), accepted) == ("not decided", "no interval")
    assert claims.decide((1.0, 1.01), None)[0] == "not decided"


def _write_tmp_good() -> Path:
    import tempfile

    return _write(Path(tempfile.mkdtemp()), "a.toml", GOOD)


def test_check_lists_confounders(tmp_path):
    (claim,) = claims.load_claim_file(_write(tmp_path, "a.toml", GOOD))
    runs = _runs(
        tmp_path,
        {"0.18.3": [_train_row(_params("mlp"), 100.0)],
         "0.18.4": [_train_row(_params("mlp"), 104.0)]},
        env={"0.18.4": {"python": {"version": "3.12.1"}}},
    )  # fmt: skip
    (entry,) = claims.check([claim], runs)
    assert entry.dsbench_ratio == pytest.approx(1.04)
    assert "confounded: python (3.11.7 vs 3.12.1)" in entry.verdict


def test_check_memory_field_and_inverted_direction(tmp_path):
    text = GOOD.replace('metric = "samples_per_s"', 'metric = "samples_per_s"\nfield = '
                        '"memory.device_peak_allocated_bytes"')  # fmt: skip
    text = text.replace('direction = "higher"', 'direction = "lower"')
    (memory,) = claims.load_claim_file(_write(tmp_path, "m.toml", text))
    # a claim about time (lower is better) mapped onto samples/s (higher is better)
    timed = dataclasses.replace(memory, dsbench=dataclasses.replace(memory.dsbench, field="value"))
    runs = _runs(
        tmp_path,
        {"0.18.3": [_train_row(_params("mlp"), 100.0, peak_bytes=3200)],
         "0.18.4": [_train_row(_params("mlp"), 125.0, peak_bytes=2900)]},
    )  # fmt: skip
    mem_entry, time_entry = claims.check([memory, timed], runs)
    assert mem_entry.dsbench_ratio == pytest.approx(2900 / 3200)
    assert time_entry.dsbench_ratio == pytest.approx(100 / 125)
    assert "ratio inverted" in time_entry.verdict


def test_check_without_runs_says_what_to_run(tmp_path):
    (claim,) = claims.load_claim_file(_write(tmp_path, "a.toml", GOOD))
    (entry,) = claims.check([claim], [])
    assert entry.kind == "none" and entry.dsbench_ratio is None
    assert entry.decision == "not decided"
    assert entry.verdict.startswith(
        "not decided: no data yet: run dsbench ab --baseline deepspeed=0.18.3 --contender "
        "deepspeed=0.18.4 --suite training"
    )


def test_a_results_folders_claims_each_beside_its_check(tmp_path):
    """:func:`claims.check_folder`: the claim files under ``<results>/claims`` that load, each
    with its check, and one warning line per file skipped; no folder, no claims."""
    folder = tmp_path / "claims"
    _write(folder, "a.toml", GOOD)
    bad = _write(folder, "b.toml", BAD[sorted(BAD)[0]][0])
    warnings = []
    checked = claims.check_folder(tmp_path, [], warnings.append)
    assert checked.folder == folder and [c.id for c in checked.claims] == ["a/train"]
    assert checked.problems == warnings and len(warnings) == 1 and str(bad) in warnings[0]
    ((claim, entry),) = checked.pairs
    assert claim is checked.claims[0] and entry.decision == "not decided"
    empty = claims.check_folder(tmp_path / "none", [], warnings.append)
    assert (empty.claims, empty.checks, empty.problems) == ([], [], [])


def test_commands_use_dsbench_ab_never_two_runs():
    """Every shipped claim whose sides `dsbench ab` can run (DeepSpeed or Python versions) is
    measured by one `dsbench ab` command with the mapping's suite and filter; no claim asks
    for `dsbench run` twice on one machine."""
    loaded = {c.id: c for c in claims.load_claims(SHIPPED)}
    bert = claims.commands(loaded["000-perf-python312-deepspeed0184/bert-large-training"])
    assert bert == [
        "dsbench ab --baseline deepspeed=0.18.3 --contender deepspeed=0.18.4 --suite training "
        "--filter 'model=bert-large'"
    ]
    gpt = claims.commands(loaded["000-perf-python312-deepspeed0184/gpt3-inference-latency"])
    assert gpt[0].startswith(
        "dsbench ab --baseline python=3.11 --contender python=3.12 --suite inference"
    )
    for cid, claim in loaded.items():
        cmds = claims.commands(claim)
        if claims.ab_side(claim.dsbench.baseline or "") and claims.ab_side(
            claim.dsbench.contender or ""
        ):
            assert len(cmds) == 1 and cmds[0].startswith("dsbench ab "), cid
        local = [c for c in cmds if "dsbench run " in c and not c.startswith("on ")]
        assert len(local) <= 1 or cmds[0].startswith("dsbench noise"), cid
    assert claims.ab_side("0.18.3") == "deepspeed=0.18.3"
    assert claims.ab_side("label=sysctl-default") is None
    assert claims.ab_side("profile=mi250x-gcd") is None


def test_check_reports_bad_selector(tmp_path):
    (claim,) = claims.load_claim_file(_write(tmp_path, "a.toml", GOOD))
    bad = dataclasses.replace(claim, dsbench=dataclasses.replace(claim.dsbench, contender="=x"))
    (entry,) = claims.check([bad], [])
    assert entry.kind == "none"
    assert entry.problem.startswith("bad selector:")
    assert entry.verdict.startswith("cannot check: bad selector")


def test_check_models_hardware_claims_and_keeps_them_labelled():
    loaded = {c.id: c for c in claims.load_claims(SHIPPED)}
    gemm = loaded["000-rocm-vs-cuda/fp16-gemm"]
    allreduce = loaded["000-rocm-vs-cuda/allreduce"]
    g, a = claims.check([gemm, allreduce], [])
    # fp16 8192^3 is compute-bound on both: the ratio of the dense fp16 peaks
    assert g.kind == "modelled" and g.measured is None
    assert g.dsbench_ratio == pytest.approx(191.5 / 312)
    assert g.decision == "not decided"  # a model decides nothing
    assert g.verdict.startswith("not decided: modelled 0.614× (roofline floors of gemm[")
    assert "vs claimed 0.85×" in g.verdict
    # 1 GiB all-reduce over 8 ranks: alpha-beta on 300 vs 200 GB/s
    s, steps = 2**30, 14
    nv = 1.75 * s / (steps * 0.47e-6 + 1.75 * s / 300e9)
    amd = 1.75 * s / (steps * 2.3e-6 + 1.75 * s / 200e9)
    assert a.dsbench_ratio == pytest.approx(amd / nv)
    assert a.modelled["baseline_profile"] == "a100-80gb-sxm"


def test_measured_beats_modelled_when_runs_exist(tmp_path):
    gemm = next(c for c in claims.load_claims(SHIPPED) if c.id.endswith("/fp16-gemm"))
    params = {"impl": "torch", "dtype": "float16", "size": 8192}

    def row(value):
        samples = [value] * 3
        return {"id": "gemm[dtype=float16,impl=torch,size=8192]", "name": "gemm",
                "params": params, "status": "ok", "metric": "throughput", "unit": "TFLOP/s",
                "direction": "higher", "value": value, "samples": samples,
                "stats": summarize(samples).to_dict(),
                "metrics": {"throughput": {"value": value}}}  # fmt: skip

    for i, (profile, value) in enumerate((("a100-80gb-sxm", 270.0), ("mi250x-gcd", 150.0))):
        doc = make_doc(f"2026010{i + 1}T000000Z-{i:06d}", f"2026-01-0{i + 1}T00:00:00+00:00",
                       [row(value)])  # fmt: skip
        doc["profile"] = {"name": profile}
        write_json(tmp_path / f"{i}.json", doc)
    (entry,) = claims.check([gemm], results.load_runs(tmp_path))
    assert entry.kind == "measured"
    assert entry.dsbench_ratio == pytest.approx(150 / 270)
    assert entry.modelled["ratio"] == pytest.approx(191.5 / 312)  # still there, apart


def test_not_measurable_claims_say_why():
    loaded = claims.load_claims(SHIPPED)
    entries = claims.check(loaded, [])
    by_id = {e.claim: e for e in entries}
    mtbf = by_id["000-stability-72h/mtbf"]
    assert mtbf.kind == "none" and mtbf.commands == []
    assert mtbf.verdict.startswith("not measurable by dsbench: ")
    assert mtbf.claimed["text"] == "claimed ≥8.28×"
    assert mtbf.decision == "not measurable"
    for entry in entries:
        assert entry.kind in ("none", "modelled")  # no runs: nothing is measured
        assert entry.measured is None
        assert entry.decision in ("not decided", "not measurable")
