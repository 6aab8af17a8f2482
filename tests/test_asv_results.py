"""The asv reader: asv result files (format 2) become dsbench runs that compare selects, pairs
and judges like its own; bad files are named and skipped."""

import json
import math

import pytest

from dsbench import compare, results
from dsbench.cli import main
from dsbench.results import asv as asv_results
from tests.conftest import make_doc, make_row, write_json

COMMIT = "e5318373aabbccddeeff00112233445566778899"
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
           "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
           "samples"]  # fmt: skip
BENCHMARKS_JSON = {
    "bench_kernels.Adamw.track_bandwidth": {
        "name": "bench_kernels.Adamw.track_bandwidth",
        "param_names": ["impl", "params"],
        "type": "track",
        "unit": "GB/s",
    },
    "bench_kernels.Adamw.time_call": {
        "name": "bench_kernels.Adamw.time_call",
        "param_names": ["impl", "params"],
        "type": "time",
        "unit": "seconds",
    },
    "bench_kernels.Adamw.peakmem_call": {
        "name": "bench_kernels.Adamw.peakmem_call",
        "param_names": ["impl", "params"],
        "type": "peakmem",
        "unit": "bytes",
    },
    "bench_inference.Decode.track_ms_per_token": {
        "name": "bench_inference.Decode.track_ms_per_token",
        "param_names": ["batch", "dtype", "model", "prompt"],
        "type": "track",
        "unit": "ms/token",
    },
    "bench_training.TrainStep.track_samples_per_s": {
        "name": "bench_training.TrainStep.track_samples_per_s",
        "param_names": ["engine", "stage"],
        "type": "track",
        "unit": "samples/s",
    },
    "bench_other.Widget.track_rate": {
        "name": "bench_other.Widget.track_rate",
        "param_names": [],
        "type": "track",
        "unit": "items/s",
    },
    "version": 2,
}


def _asv_file(python, ds, *, adamw, decode, train, started, samples=None):
    """An asv result file as asv 0.6 writes it (one machine, commit and environment)."""
    env_name = f"virtualenv-py{python}-deepspeed{ds}-torch2.13.0-DS_BUILD_OPS0"
    rows = {
        "bench_kernels.Adamw.track_bandwidth": [
            [adamw, adamw * 0.9], [["'torch'"], ["1000000", "4000000"]], "v1", started, 3.0
        ],
        "bench_kernels.Adamw.time_call": [
            [0.002, 0.008], [["'torch'"], ["1000000", "4000000"]], "v1", started + 5, 1.0,
            None, None, None, None, None, None, samples,
        ],
        "bench_kernels.Adamw.peakmem_call": [
            [1.5e8, None], [["'torch'"], ["1000000", "4000000"]], "v1", started + 9, 1.0
        ],
        "bench_inference.Decode.track_ms_per_token": [
            [decode], [["1"], ["'float32'"], ["'gpt-tiny'"], ["64"]], "v1", started + 12, 2.0
        ],
        "bench_training.TrainStep.track_samples_per_s": [
            [train, float("nan")], [["'dsbench'", "'deepspeed'"], ["1"]], "v1", started + 20, 9.0
        ],
        "bench_other.Widget.track_rate": [[7.0], [], "v1", started + 30, 0.1],
    }  # fmt: skip
    return {
        "commit_hash": COMMIT,
        "env_name": env_name,
        "date": 1_790_000_000_000,
        "params": {
            "arch": "x86_64",
            "cpu": "AMD EPYC",
            "machine": "devbox",
            "num_cpu": "2",
            "os": "Linux 6.18",
            "ram": "24000000",
            "python": python,
            "torch": "2.13.0",
            "deepspeed": ds,
        },
        "python": python,
        "requirements": {"torch": "2.13.0", "triton": "3.8.0", "numpy": "", "deepspeed": ds},
        "env_vars": {"DS_BUILD_OPS": "0"},
        "result_columns": COLUMNS,
        "results": rows,
        "durations": {},
        "version": 2,
    }


T0 = 1_796_000_000_000  # ms since the epoch


@pytest.fixture
def asv_root(tmp_path):
    """results/asv with the four environments of the matrix (Python x DeepSpeed)."""
    root = tmp_path / "results"
    asv = root / "asv"
    write_json(asv / "benchmarks.json", BENCHMARKS_JSON)
    write_json(asv / "devbox" / "machine.json", {"machine": "devbox", "version": 1})
    matrix = [  # python, deepspeed, adamw GB/s, decode ms/token, train samples/s
        ("3.11", "0.18.3", 20.0, 4.0, 1000.0),
        ("3.11", "0.18.4", 20.2, 4.0, 1300.0),
        ("3.12", "0.18.3", 16.0, 3.0, 1010.0),
        ("3.12", "0.18.4", 16.1, 3.0, 1310.0),
    ]
    for k, (py, ds, adamw, decode, train) in enumerate(matrix):
        doc = _asv_file(py, ds, adamw=adamw, decode=decode, train=train, started=T0 + k * 60_000)
        write_json(asv / "devbox" / f"{COMMIT[:8]}-{doc['env_name']}.json", doc)
    return root


def _load(root, warnings=None):
    warn = warnings.append if warnings is not None else pytest.fail
    return asv_results.load_all_runs(root, warn=warn)


def test_each_asv_file_becomes_a_run_shaped_like_dsbench_results(asv_root):
    runs = _load(asv_root)
    assert [(r.fields["python"], r.fields["deepspeed"]) for r in runs] == [
        ("3.11", "0.18.3"), ("3.11", "0.18.4"), ("3.12", "0.18.3"), ("3.12", "0.18.4")
    ]  # fmt: skip
    run = runs[0]
    assert run.id == "asv-e5318373-virtualenv-py3.11-deepspeed0.18.3-torch2.13.0-DS_BUILD_OPS0"
    assert run.source == "asv" and run.suite == "asv"
    assert run.record.to_json()["asv"]["file"].startswith("devbox/e5318373-virtualenv-py3.11")
    assert run.created == "2026-11-30T00:53:20+00:00"  # the first benchmark's start
    assert run.machine == "devbox"
    f = run.fields
    assert (f["torch"], f["triton"], f["numpy"], f["commit"]) == ("2.13.0", "3.8.0", None, COMMIT)
    assert f["cpu"] == "AMD EPYC"
    results.validate(run.record.to_json(), "asv run")  # the same checks as dsbench's own files


def test_rows_take_ids_units_and_direction_from_the_definitions(asv_root):
    rows = {k: r.to_json() for k, r in _load(asv_root)[0].rows.items()}
    adamw = rows["adamw[impl=torch,params=1000000]"]  # the id `dsbench run` gives this case
    assert (adamw["unit"], adamw["direction"], adamw["value"]) == ("GB/s", "higher", 20.0)
    assert adamw["params"] == {"impl": "torch", "params": 1000000}
    assert adamw["stats"]["n"] == 1 and "samples" not in adamw
    assert rows["adamw[impl=torch,params=4000000]"]["value"] == pytest.approx(18.0)
    timed = rows["adamw.time_call[impl=torch,params=1000000]"]
    assert (timed["unit"], timed["direction"]) == ("seconds", "lower")
    mem = rows["adamw.peakmem_call[impl=torch,params=1000000]"]
    assert (mem["unit"], mem["direction"], mem["value"]) == ("bytes", "lower", 1.5e8)
    failed = rows["adamw.peakmem_call[impl=torch,params=4000000]"]
    assert failed["status"] == "failed" and "asv run --show-stderr" in failed["error"]
    decode = rows["decode[batch=1,dtype=float32,model=gpt-tiny,prompt=64]"]
    assert (decode["unit"], decode["direction"]) == ("ms/token", "lower")
    train = rows["train_step[engine=dsbench,stage=1]"]
    assert (train["unit"], train["direction"]) == ("samples/s", "higher")
    skipped = rows["train_step[engine=deepspeed,stage=1]"]
    assert skipped["status"] == "skipped" and "NotImplementedError" in skipped["reason"]
    widget = rows["bench_other.Widget.track_rate"]  # no dsbench definition: by its unit
    assert (widget["unit"], widget["direction"]) == ("items/s", "higher")


@pytest.mark.parametrize(
    ("unit", "direction"),
    [("GB/s", "higher"), ("TFLOP/s", "higher"), ("samples/s", "higher"),
     ("ms/token", "lower"), ("seconds", "lower"), ("bytes", "lower"), ("unit", "lower")],
)  # fmt: skip
def test_direction_from_unit(unit, direction):
    assert asv_results.direction_of(unit) == direction


def test_recorded_samples_give_statistics(asv_root):
    asv = asv_root / "asv" / "devbox"
    path = next(asv.glob("*py3.11-deepspeed0.18.3*"))
    doc = json.loads(path.read_text())
    samples = [[0.002 + i * 1e-5 for i in range(10)], None]
    doc["results"]["bench_kernels.Adamw.time_call"][-1] = samples
    path.write_text(json.dumps(doc))
    row = _load(asv_root)[0].rows["adamw.time_call[impl=torch,params=1000000]"].to_json()
    assert row["samples"] == samples[0] and row["stats"]["n"] == 10
    assert row["stats"]["ci_exact"] is True


def test_cli_compare_python_311_vs_312_carries_environments(asv_root, capsys):
    args = ["compare", "--results", str(asv_root), "--baseline", "python=3.11"]
    assert main([*args, "--contender", "python=3.12", "--format", "plain"]) == 0
    out = capsys.readouterr().out
    # the newest 3.11 run, paired with the 3.12 run of the same DeepSpeed version
    assert "baseline: run asv-e5318373-virtualenv-py3.11-deepspeed0.18.4" in out
    assert "contender: run asv-e5318373-virtualenv-py3.12-deepspeed0.18.4" in out
    assert "confounded" not in out
    assert "baseline env" in out and "contender env" in out
    lines = {line.split()[0]: line for line in out.splitlines() if "[" in line}
    adamw = lines["adamw[impl=torch,params=1000000]"]
    # asv --quick keeps one value: never better/worse, whatever the ratio
    assert "GB/s ↑" in adamw and "0.797" in adamw and "inconclusive" in adamw
    assert "asv: python 3.11, deepspeed 0.18.4" in adamw
    assert "asv: python 3.12, deepspeed 0.18.4" in adamw
    decode = lines["decode[batch=1,dtype=float32,model=gpt-tiny,prompt=64]"]
    assert "ms/token ↓" in decode and "inconclusive" in decode  # 4.0 -> 3.0 ms/token
    train = lines["train_step[engine=dsbench,stage=1]"]
    assert "better" not in train and "worse" not in train
    assert "have one value on a side (asv --quick, track_): inconclusive" in out  # stated
    assert "0 better, 0 worse" in out


def test_cli_compare_deepspeed_versions_pairs_the_same_python(asv_root, capsys):
    args = ["compare", "--results", str(asv_root), "--baseline", "0.18.3", "--contender", "0.18.4"]
    assert main([*args, "--format", "github"]) == 0  # full text, a row a line
    out = capsys.readouterr().out
    assert "baseline: run asv-e5318373-virtualenv-py3.12-deepspeed0.18.3" in out
    assert "contender: run asv-e5318373-virtualenv-py3.12-deepspeed0.18.4" in out
    assert "newest of 2 runs matching '0.18.3'" in out
    line = next(x for x in out.splitlines() if "train_step[engine=dsbench,stage=1]" in x)
    assert "samples/s ↑" in line and "1.297" in line and "inconclusive" in line
    assert "asv: python 3.12, deepspeed 0.18.3" in line


def test_compare_given_asvs_own_results_folder_reads_it_without_warnings(asv_root, capsys):
    # `--results results/asv`: the folder asv writes to, not a dsbench results root
    runs = _load(asv_root / "asv")  # a warning fails the test
    assert len(runs) == 4 and all(r.source == "asv" for r in runs)
    args = ["compare", "--results", str(asv_root / "asv"), "--baseline", "0.18.3"]
    assert main([*args, "--contender", "0.18.4"]) == 0
    captured = capsys.readouterr()
    out = " ".join(captured.out.split())  # the run line wraps to the terminal
    assert "contender: run asv-e5318373-virtualenv-py3.12-deepspeed0.18.4" in out
    assert "warning" not in captured.err


def test_closest_pair_over_newest_when_the_newest_differs_more(asv_root):
    """A newer dsbench run with Python 3.11 but another torch loses to the asv 3.11 run."""
    doc = make_doc(
        "20270101T000000Z-dddddd",
        "2027-01-01T00:00:00+00:00",
        [make_row("adamw[impl=torch,params=1000000]", [20.0 + i / 100 for i in range(20)])],
        env={"packages": {"torch": "2.13.0+cpu", "deepspeed": "0.18.4"}},
    )
    results.write_run(doc, root=asv_root)
    runs = _load(asv_root)
    b, c, notes = compare.pick_runs(runs, "python=3.11", "python=3.12")
    assert b.run.source == "asv" and b.run.fields["deepspeed"] == "0.18.4"
    assert (c.run.fields["python"], c.run.fields["deepspeed"]) == ("3.12", "0.18.4")
    assert "differing least from the other side" in notes[0]
    # pairs with a dsbench run by benchmark id: asv's track_ of the primary metric
    rows = compare.compare_rows(runs[-1].rows, b.rows)
    assert rows[0].id == "adamw[impl=torch,params=1000000]" and rows[0].ratio is not None


def test_bad_asv_selector_is_one_line_listing_versions(asv_root, capsys):
    assert main(["compare", "--results", str(asv_root), "--baseline", "python=3.10"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "baseline selector 'python=3.10' matches no run" in err
    assert "DeepSpeed versions: 0.18.3, 0.18.4; 4 run(s)" in err


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        (lambda text, doc: text[: len(text) // 2], "corrupt JSON"),
        (lambda text, doc: json.dumps(dict(doc, version=1)), "asv update"),
        (lambda text, doc: json.dumps({k: v for k, v in doc.items() if k != "results"}),
         "field 'results' missing"),
        (lambda text, doc: json.dumps(
            dict(doc, results={"bench_kernels.Adamw.track_bandwidth": [[1.0], [["'torch'"],
                 ["1", "2"]]]})), "1 results for 2 parameter combinations"),
        (lambda text, doc: json.dumps(
            dict(doc, results={"bench_kernels.Adamw.track_bandwidth": [["fast"], [["'t'"],
                 ["1"]]]})), "is not a number"),
    ],
)  # fmt: skip
def test_bad_asv_file_is_named_and_skipped(asv_root, damage, needle):
    path = next((asv_root / "asv" / "devbox").glob("*py3.12-deepspeed0.18.3*"))
    text = path.read_text()
    path.write_text(damage(text, json.loads(text)))
    warnings = []
    runs = _load(asv_root, warnings)
    assert len(runs) == 3
    assert len(warnings) == 1 and str(path) in warnings[0] and needle in warnings[0], warnings


def test_missing_benchmarks_json_names_parameters_by_position(asv_root):
    (asv_root / "asv" / "benchmarks.json").unlink()
    warnings = []
    runs = _load(asv_root, warnings)
    assert len(runs) == 4 and len(warnings) == 1 and "benchmarks.json" in warnings[0]
    assert "adamw[param1=torch,param2=1000000]" in runs[0].rows


def test_nan_and_null_never_reach_values(asv_root):
    for run in _load(asv_root):
        for row in run.record.to_json()["benchmarks"]:
            if row["status"] == "ok":
                assert math.isfinite(row["value"])
            else:
                assert "value" not in row


def test_existing_environment_records_no_versions(asv_root):
    """`asv run --python=same` stores the interpreter's path and the matrix, not what the
    environment holds: such a run carries no versions rather than wrong ones."""
    doc = _asv_file("3.11", "0.18.4", adamw=20.0, decode=4.0, train=1000.0, started=T0 + 10**6)
    doc.update(env_name="existing-py_usr_bin_python3", python="/usr/bin/python3")
    write_json(asv_root / "asv" / "devbox" / f"{COMMIT[:8]}-existing.json", doc)
    run = _load(asv_root)[-1]
    assert run.record.to_json()["asv"]["existing_env"] is True
    assert (run.fields["python"], run.fields["deepspeed"], run.fields["torch"]) == (None,) * 3
    assert compare.env_label(run, run) == "asv: (versions not recorded)"


def test_track_samples_are_launches_and_can_decide(tmp_path):
    """`asv run -a rounds=6 --record-samples`: a track_ benchmark keeps one value per round (a
    fresh process each), so six rounds a side are six launches and compare can decide; a
    time_ benchmark's pooled samples stay one launch."""
    root = tmp_path / "results"
    asv = root / "asv"
    write_json(asv / "benchmarks.json", BENCHMARKS_JSON)
    write_json(asv / "devbox" / "machine.json", {"machine": "devbox", "version": 1})
    spread = (1.0, 1.004, 0.996, 1.002, 0.998, 1.001)
    for i, (ds, gbps) in enumerate((("0.18.3", 20.0), ("0.18.4", 16.0))):
        doc = _asv_file("3.11", ds, adamw=gbps, decode=4.0, train=1000.0, started=T0 + i)
        track = doc["results"]["bench_kernels.Adamw.track_bandwidth"]
        track += [None] * 6 + [[[gbps * f for f in spread], [0.9 * gbps * f for f in spread]]]
        timed = doc["results"]["bench_kernels.Adamw.time_call"]
        timed[-1] = [[0.002 * (1 + i / 4) * f for f in spread], None]
        write_json(asv / "devbox" / f"{COMMIT[:8]}-{doc['env_name']}.json", doc)
    runs = _load(root)
    row = runs[0].rows["adamw[impl=torch,params=1000000]"].to_json()
    assert row["rounds"] == [{"launch": k, "n": 1} for k in range(6)]
    base, cont, _ = compare.pick_runs(runs, "0.18.3", "0.18.4")
    rows = {r.id: r for r in compare.compare_rows(base.rows, cont.rows)}
    assert rows["adamw[impl=torch,params=1000000]"].change == "worse"  # 20 -> 16 GB/s
    assert rows["adamw[impl=torch,params=4000000]"].change == "worse"
    timed = rows["adamw.time_call[impl=torch,params=1000000]"]
    assert timed.change == "inconclusive" and timed.basis.startswith("one round per side")
