"""compare: selectors, pairing, direction-aware significance, golden tables, confounders."""

import textwrap

import pytest

from dsbench import compare, results
from dsbench.cli import main
from dsbench.errors import UsageError
from tests.conftest import make_doc, make_row

TS = "2026-11-30T00:00:0{}+00:00"


def _series(start, step=0.01, n=20):
    return [start + step * i for i in range(n)]


def _runs(tmp_path):
    """Two runs: a throughput regression, a time improvement, noise, one-sided and failed rows."""
    base_rows = [
        make_row("adamw[params=1000000]", _series(50.0)),  # GB/s, higher is better
        make_row("gemm[size=512]", _series(10.0), unit="ms", direction="lower"),
        make_row("allreduce[size=1048576]", _series(1.0)),
        make_row("allreduce[size=4194304]", _series(2.0, 0.001)),  # +2%: significant, < factor
        make_row("reduce_scatter[size=1048576]", _series(3.0)),
        make_row("old_only[x=1]", _series(1.0)),
    ]
    cont_rows = [
        make_row("adamw[params=1000000]", _series(40.0)),
        make_row("gemm[size=512]", _series(8.0), unit="ms", direction="lower"),
        make_row("allreduce[size=1048576]", _series(1.0005)),
        make_row("allreduce[size=4194304]", _series(2.04, 0.001)),
        make_row("reduce_scatter[size=1048576]", [], status="failed"),
        make_row("new_only[x=1]", _series(1.0)),
    ]
    base = make_doc(
        "20261130T000000Z-aaaaaa",
        TS.format(0),
        base_rows,
        label="before",
        env={"packages": {"torch": "2.13.0+cpu", "deepspeed": "0.18.3"}},
    )
    cont = make_doc(
        "20261130T000001Z-bbbbbb",
        TS.format(1),
        cont_rows,
        label="after",
        env={
            "packages": {"torch": "2.13.0+cu130", "deepspeed": "0.18.4"},
            "python": {"version": "3.12.1"},
        },
    )
    for doc in (base, cont):
        results.write_run(doc, root=tmp_path)
    return results.load_runs(tmp_path)


GOLDEN_GITHUB = textwrap.dedent("""\
    | benchmark                    | unit   | baseline   | contender   | ratio   | change            |
    |------------------------------|--------|------------|-------------|---------|-------------------|
    | adamw[params=1000000]        | GB/s ↑ | 50.09      | 40.09       | 0.800   | worse             |
    | gemm[size=512]               | ms ↓   | 10.09      | 8.095       | 0.802   | better            |
    | allreduce[size=1048576]      | GB/s ↑ | 1.095      | 1.095       | 1.000   |                   |
    | allreduce[size=4194304]      | GB/s ↑ | 2.01       | 2.05        | 1.020   |                   |
    | reduce_scatter[size=1048576] | GB/s ↑ | 3.095      | n/a         |         | contender failed  |
    | old_only[x=1]                | GB/s ↑ | 1.095      | n/a         |         | only in baseline  |
    | new_only[x=1]                | GB/s ↑ | n/a        | 1.095       |         | only in contender |""")


def test_golden_table_direction_aware(tmp_path):
    base, cont = _runs(tmp_path)
    rows = compare.compare_rows(base.benchmarks, cont.benchmarks, factor=1.05)
    assert compare.render(rows, "github") == GOLDEN_GITHUB
    assert [r.id for r in compare.regressions(rows)] == ["adamw[params=1000000]"]


def test_golden_csv(tmp_path):
    base, cont = _runs(tmp_path)
    rows = compare.compare_rows(base.benchmarks, cont.benchmarks)
    assert compare.render(rows, "csv").splitlines()[:3] == [
        "benchmark,unit,baseline,contender,ratio,change",
        "adamw[params=1000000],GB/s ↑,50.09,40.09,0.800,worse",
        "gemm[size=512],ms ↓,10.09,8.095,0.802,better",
    ]


def test_small_factor_counts_significant_two_percent(tmp_path):
    base, cont = _runs(tmp_path)
    rows = {r.id: r for r in compare.compare_rows(base.benchmarks, cont.benchmarks, factor=1.01)}
    assert rows["allreduce[size=4194304]"].change == "better"
    assert rows["allreduce[size=1048576]"].change == ""  # 0.05% is within any factor


def test_html_escapes_cells(tmp_path):
    row = make_row("<script>alert(1)</script>", _series(1.0))
    rows = compare.compare_rows({row["id"]: row}, {row["id"]: row})
    out = compare.render(rows, "html")
    assert "<script>" not in out and "&lt;script&gt;" in out


@pytest.mark.parametrize(
    ("key", "actual", "wanted", "expected"),
    [
        ("python", "3.11.7", "3.11", True),
        ("python", "3.110.1", "3.11", False),
        ("torch", "2.13.0+cpu", "2.13.0", True),
        ("torch", "2.13.0+cpu", "2.13.0+cu130", False),
        ("commit", "abcdef123456", "abcdef", True),
        ("commit", "abcdef123456", "abc", False),  # too short to be a prefix
        ("device", "NVIDIA H100 80GB HBM3", "h100", True),
        ("backend", "rocm", "ROCM", True),
        ("backend", "cuda", "rocm", False),
        ("deepspeed", None, "none", True),
    ],
)
def test_field_matching(key, actual, wanted, expected):
    assert compare.field_matches(key, actual, wanted) is expected


def test_selectors_pick_runs_and_say_which(tmp_path):
    base, cont = _runs(tmp_path)
    b, c, notes = compare.pick_runs([base, cont], "0.18.3", None)  # DeepSpeed version
    assert (b.run, c.run) == (base, cont)
    assert "newest run that is not the baseline" in notes[1]
    b, c, _ = compare.pick_runs([base, cont], "python=3.12", "label=before")
    assert (b.run, c.run) == (cont, base)
    # several matches: the newest is used and the note says so
    _, _, notes = compare.pick_runs([base, cont], "backend=cpu", "label=before")
    assert "newest of 2 runs matching 'backend=cpu'" in notes[0]


def test_selector_errors_name_the_problem(tmp_path):
    base, cont = _runs(tmp_path)
    with pytest.raises(UsageError, match=r"unknown selector key 'pyhton' \(did you mean 'python'"):
        compare.Selector.parse("pyhton=3.11")
    with pytest.raises(UsageError) as exc:
        compare.pick_runs([base, cont], "0.17.2", None)
    msg = str(exc.value)
    assert "matches no run" in msg and "labels: after, before" in msg and "0.18.3, 0.18.4" in msg


def test_confounders_listed_besides_the_axis(tmp_path):
    base, cont = _runs(tmp_path)
    diffs = compare.confounders(base, cont, axes={"python"})
    assert diffs == ["torch (2.13.0+cpu vs 2.13.0+cu130)", "deepspeed (0.18.3 vs 0.18.4)"]


def test_cli_compare_and_fail_on_regression(tmp_path, capsys):
    _runs(tmp_path)
    args = ["compare", "--results", str(tmp_path), "--baseline", "python=3.11"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "baseline: run 20261130T000000Z-aaaaaa label 'before'" in out
    assert "confounded: besides python, the runs differ in: torch" in out
    assert GOLDEN_GITHUB in out
    assert "1 better, 1 worse" in out
    assert main([*args, "--fail-on-regression"]) == 1


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--baseline", "nope=1"], "unknown selector key 'nope'"),
        (["--baseline", "before", "--format", "xml"], "invalid choice: 'xml'"),
        (["--baseline", "label=zzz"], "baseline selector 'label=zzz' matches no run"),
    ],
)
def test_cli_compare_bad_input_exit_2_one_line(tmp_path, capsys, argv, needle):
    _runs(tmp_path)
    assert main(["compare", "--results", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def _engine_row(engine, stage, samples):
    row = make_row(f"train_step[engine={engine},stage={stage}]", samples, unit="samples/s")
    row["params"] = {"engine": engine, "stage": stage}
    return row


def test_parameter_selector_compares_two_sides_of_one_run(tmp_path, capsys):
    rows = [
        _engine_row("dsbench", 1, _series(900.0)),
        _engine_row("deepspeed", 1, _series(600.0)),
        _engine_row("dsbench", 2, _series(800.0)),
        _engine_row("deepspeed", 2, _series(790.0)),
    ]
    results.write_run(
        make_doc("20261130T000000Z-cccccc", TS.format(0), rows, label="train"), root=tmp_path
    )
    assert main(["compare", "--results", str(tmp_path), "--baseline", "engine=deepspeed"]) == 0
    out = capsys.readouterr().out
    assert "contender: rows with engine=dsbench of the same run" in out
    assert "confounded" not in out  # one run: nothing else differs
    lines = {line.split("|")[1].strip(): line for line in out.splitlines() if "train_step" in line}
    assert set(lines) == {"train_step[stage=1]", "train_step[stage=2]"}
    assert "1.500" in lines["train_step[stage=1]"] and "better" in lines["train_step[stage=1]"]
    assert "better" not in lines["train_step[stage=2]"]  # +1.3%: within the factor
