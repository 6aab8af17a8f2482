"""compare: selectors, pairing, direction-aware significance, golden tables, confounders."""

import textwrap

import pytest

from dsbench import compare, results
from dsbench.cli import main
from dsbench.errors import UsageError
from dsbench.stats import Noise
from tests.conftest import make_doc, make_row

TS = "2026-11-30T00:00:0{}+00:00"


def _series(start, step=0.01, n=20):
    return [start + step * i for i in range(n)]


TIGHT = (1.0, 1.003, 0.997, 1.002, 0.998, 1.001)
"""Launch-to-launch factors of a quiet machine (about 0.2%)."""
LOOSE = (1.0, 1.15, 0.9, 1.1, 0.85, 1.05)
"""... and of a loaded one (about 11%)."""


def _launches(start, factors=TIGHT, step=0.001, n=10):
    """One list of samples per launch: ``start`` scaled by each launch's factor."""
    return [[f * (start + step * i) for i in range(n)] for f in factors]


def _runs(tmp_path):
    """Two runs of six launches each: a throughput regression, a time improvement, no change,
    +2%, a loaded-machine row, one-sided and failed rows."""
    base_rows = [
        make_row("adamw[params=1000000]", _launches(50.0)),  # GB/s, higher is better
        make_row("gemm[size=512]", _launches(10.0), unit="ms", direction="lower"),
        make_row("allreduce[size=1048576]", _launches(1.0)),
        make_row("allreduce[size=4194304]", _launches(2.0)),  # +2%: decided, within 1.05
        make_row("allgather[size=1048576]", _launches(1.0, LOOSE)),
        make_row("reduce_scatter[size=1048576]", _launches(3.0)),
        make_row("old_only[x=1]", _launches(1.0)),
    ]
    cont_rows = [
        make_row("adamw[params=1000000]", _launches(40.0, TIGHT[::-1])),
        make_row("gemm[size=512]", _launches(8.0, TIGHT[::-1]), unit="ms", direction="lower"),
        make_row("allreduce[size=1048576]", _launches(1.0005, TIGHT[::-1])),
        make_row("allreduce[size=4194304]", _launches(2.04, TIGHT[::-1])),
        make_row("allgather[size=1048576]", _launches(1.3, LOOSE[::-1])),
        make_row("reduce_scatter[size=1048576]", [], status="failed"),
        make_row("new_only[x=1]", _launches(1.0)),
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
    | benchmark                    | unit   | baseline   | contender   | ratio   | 99% interval   | change            | basis                                                                                                                                                                 |
    |------------------------------|--------|------------|-------------|---------|----------------|-------------------|-----------------------------------------------------------------------------------------------------------------------------------------------------------------------|
    | adamw[params=1000000]        | GB/s ↑ | 50.01      | 40.01       | 0.800   | 0.797-0.803    | worse             | t(10)+bootstrap 6+6 rounds                                                                                                                                            |
    | gemm[size=512]               | ms ↓   | 10.01      | 8.006       | 0.800   | 0.797-0.803    | better            | t(10)+bootstrap 6+6 rounds                                                                                                                                            |
    | allreduce[size=1048576]      | GB/s ↑ | 1.005      | 1.005       | 1.000   | 0.996-1.005    | unchanged         | t(10)+bootstrap 6+6 rounds                                                                                                                                            |
    | allreduce[size=4194304]      | GB/s ↑ | 2.005      | 2.045       | 1.020   | 1.016-1.024    | unchanged         | t(10)+bootstrap 6+6 rounds                                                                                                                                            |
    | allgather[size=1048576]      | GB/s ↑ | 1.007      | 1.308       | 1.299   | 1.048-1.609    | inconclusive      | spread too wide: the interval reaches across x1.05; yet it excludes x1: a change whose size against x1.05 is not yet known; about 7 rounds a side would decide x1.299 |
    | reduce_scatter[size=1048576] | GB/s ↑ | 3.005      | n/a         |         |                | contender failed  |                                                                                                                                                                       |
    | old_only[x=1]                | GB/s ↑ | 1.005      | n/a         |         |                | only in baseline  |                                                                                                                                                                       |
    | new_only[x=1]                | GB/s ↑ | n/a        | 1.005       |         |                | only in contender |                                                                                                                                                                       |""")


def test_golden_table_four_verdicts(tmp_path):
    base, cont = _runs(tmp_path)
    rows = compare.compare_rows(base.rows, cont.rows, factor=1.05)
    assert compare.rows_table(rows, "github") == GOLDEN_GITHUB
    assert [r.id for r in compare.regressions(rows)] == ["adamw[params=1000000]"]
    assert compare.tally(rows) == {
        "better": 1,
        "worse": 1,
        "unchanged": 2,
        "inconclusive": 1,
        "one side only": 2,
        "not comparable": 1,
    }


def test_golden_csv(tmp_path):
    base, cont = _runs(tmp_path)
    rows = compare.compare_rows(base.rows, cont.rows)
    assert compare.rows_table(rows, "csv").splitlines()[:3] == [
        "benchmark,unit,baseline,contender,ratio,99% interval,change,basis",
        "adamw[params=1000000],GB/s ↑,50.01,40.01,0.800,0.797-0.803,worse,t(10)+bootstrap 6+6 rounds",
        "gemm[size=512],ms ↓,10.01,8.006,0.800,0.797-0.803,better,t(10)+bootstrap 6+6 rounds",
    ]


def test_small_factor_decides_two_percent(tmp_path):
    base, cont = _runs(tmp_path)
    rows = {r.id: r for r in compare.compare_rows(base.rows, cont.rows, factor=1.01)}
    assert rows["allreduce[size=4194304]"].change == "better"
    assert rows["allreduce[size=1048576]"].change == "unchanged"  # 0.05% is within any factor


def test_one_launch_per_side_is_inconclusive_without_a_noise_figure(tmp_path):
    rows = [make_row("adamw[params=1000000]", _series(50.0))]
    slower = [make_row("adamw[params=1000000]", _series(40.0))]
    (b,) = compare.compare_rows({r["id"]: r for r in rows}, {r["id"]: r for r in slower})
    assert b.change == "inconclusive" and b.low is None
    assert b.basis.startswith("one round per side and no noise figure")
    noise = {b.id: Noise(sigma=0.02, df=9, source="calib")}
    (d,) = compare.compare_rows(
        {r["id"]: r for r in rows}, {r["id"]: r for r in slower}, noise=noise
    )
    assert d.change == "worse" and d.basis == "t(9) 1+1 rounds, noise figure calib"


def test_three_samples_apart_are_not_significant():
    # exact Mann-Whitney p = 0.1 for complete separation of 3 and 3: never better/worse
    base, cont = make_row("x", [100, 101, 102]), make_row("x", [106, 107, 108])
    (r,) = compare.compare_rows({"x": base}, {"x": cont}, noise={"x": Noise(sigma=1e-3, df=50)})
    assert r.change == "inconclusive" and "too few samples (3+3)" in r.basis


def test_html_escapes_cells(tmp_path):
    row = make_row("<script>alert(1)</script>", _series(1.0))
    rows = compare.compare_rows({row["id"]: row}, {row["id"]: row})
    out = compare.rows_table(rows, "html")
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
    assert "the closest run with another deepspeed (0.18.3 vs 0.18.4)" in notes[1]
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


def test_dsbench_versions_of_one_commit_are_no_confounder(tmp_path):
    """Two sides of one commit, one run by an interpreter without dsbench installed (its version
    then read '0.0.0+unknown' before c44ea7e): the same code, not a confounder; two commits
    with two versions are."""
    from dsbench.results import Run, validate

    def run(version, commit):
        env = {"dsbench": {"version": version, "commit": commit}}
        doc = make_doc("20261205T000000Z-aaaaaa", "2026-12-05T00:00:00+00:00", [], env=env)
        return Run(path=tmp_path / f"{version}.json", record=validate(doc, "t"))

    same = compare.confounders(run("0.1.0", "3b7238c"), run("0.0.0+unknown", "3b7238c"), set())
    assert same == []
    other = compare.confounders(run("0.1.0", "3b7238c"), run("0.2.0", "c44ea7e"), set())
    assert other == ["dsbench (0.1.0 vs 0.2.0)", "commit (3b7238c vs c44ea7e)"]


def test_cli_compare_and_fail_on_regression(tmp_path, capsys):
    _runs(tmp_path)
    # the full text (the terminal format: tests/test_terminal_width.py)
    args = ["compare", "--results", str(tmp_path), "--baseline", "python=3.11", "--format",
            "github"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "baseline: run 20261130T000000Z-aaaaaa label 'before'" in out
    assert "confounded: besides python, the runs differ in: torch" in out
    assert GOLDEN_GITHUB in out
    assert "1 better, 1 worse, 2 unchanged, 1 inconclusive" in out
    assert "2 on one side only, 1 failed, skipped or unlike" in out
    assert main([*args, "--fail-on-regression"]) == 1


def _run(tmp_path, run_id, when, ids, deepspeed, python="3.11.7", value=1.0, **kw):
    rows = [make_row(i, _launches(value)) for i in ids]
    env = {"packages": {"torch": "2.13.0+cpu", "deepspeed": deepspeed},
           "python": {"version": python}}  # fmt: skip
    results.write_run(make_doc(run_id, TS.format(when), rows, env=env, **kw), root=tmp_path)


def test_headline_command_picks_the_closest_run_of_another_version(tmp_path, capsys):
    """`dsbench compare --baseline 0.18.3` as typed: the contender is the run that differs in
    the DeepSpeed version and least else, sharing cases, not merely the newest run."""
    _run(tmp_path, "20261130T000000Z-aaaaaa", 0, ["adamw[p=1]", "gemm[s=1]"], "0.18.3")
    _run(tmp_path, "20261130T000001Z-bbbbbb", 1, ["adamw[p=1]"], "0.18.4")  # the one
    _run(tmp_path, "20261130T000002Z-cccccc", 2, ["adamw[p=1]"], "0.18.4", python="3.12.1")
    _run(tmp_path, "20261130T000003Z-dddddd", 3, ["decode[b=1]"], "0.18.4")  # no shared case
    assert main(["compare", "--results", str(tmp_path), "--baseline", "0.18.3"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # wrapped to the terminal
    assert "contender: run 20261130T000001Z-bbbbbb" in out
    assert "closest run with another deepspeed (0.18.3 vs 0.18.4)" in out
    assert "1 unchanged, 0 inconclusive" in out and "1 on one side only" in out


def test_headline_command_with_no_comparable_run_names_the_command(tmp_path, capsys):
    _run(tmp_path, "20261130T000000Z-aaaaaa", 0, ["adamw[p=1]"], "0.18.3")
    _run(tmp_path, "20261130T000001Z-bbbbbb", 1, ["gemm[s=1]"], "0.18.4")
    assert main(["compare", "--results", str(tmp_path), "--baseline", "0.18.3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "shares a benchmark case" in err
    assert "dsbench ab --baseline deepspeed=0.18.3 --contender deepspeed=VERSION" in err
    # both sides named, still no shared case: the same one line
    args = ["--baseline", "0.18.3", "--contender", "0.18.4"]
    assert main(["compare", "--results", str(tmp_path), *args]) == 2
    assert "shares a benchmark case" in capsys.readouterr().err


def test_separate_single_launch_runs_use_the_newest_noise_figure(tmp_path, capsys):
    ids = ["adamw[p=1]"]
    one = lambda v: [make_row(i, _series(v, 0.001)) for i in ids]  # noqa: E731
    env = {"packages": {"torch": "2.13.0+cpu", "deepspeed": "0.18.4"}}
    for run_id, when, rows, label in [
        ("20261130T000000Z-aaaaaa", 0, one(50.0), "a1"),
        ("20261130T000001Z-bbbbbb", 1, one(40.0), "a2"),
    ]:
        results.write_run(make_doc(run_id, TS.format(when), rows, label=label, env=env),
                          root=tmp_path)  # fmt: skip
    args = ["compare", "--results", str(tmp_path), "--baseline", "a1", "--contender", "a2"]
    assert main([*args, "--fail-on-regression"]) == 0  # 0.8x but inconclusive: not a failure
    out = capsys.readouterr().out
    assert "0 worse" in out and "one round per side and no noise figure" in out
    calib = make_doc("20261130T000002Z-cccccc", TS.format(2),
                     [make_row(i, _launches(50.0, TIGHT)) for i in ids],
                     label="noise", env=env)  # fmt: skip
    calib["purpose"] = "noise"
    results.write_run(calib, root=tmp_path)
    assert main(args) == 1 - 1  # decided, and exit 0 without --fail-on-regression
    out = " ".join(capsys.readouterr().out.split())  # wrapped to the terminal
    assert "noise figure: run 20261130T000002Z-cccccc" in out
    assert "1 worse" in out and "noise figure 20261130T000002Z-cccccc" in out


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
    row = make_row(
        f"train_step[engine={engine},stage={stage}]", samples, unit="samples/s", one_launch=True
    )
    row["params"] = {"engine": engine, "stage": stage}
    return row


def test_parameter_selector_compares_two_sides_of_one_run(tmp_path, capsys):
    rows = [
        _engine_row("dsbench", 1, _launches(900.0, n=4)),
        _engine_row("deepspeed", 1, _launches(600.0, n=4)),
        _engine_row("dsbench", 2, _launches(800.0, n=4)),
        _engine_row("deepspeed", 2, _launches(790.0, n=4)),
    ]
    results.write_run(
        make_doc("20261130T000000Z-cccccc", TS.format(0), rows, label="train"), root=tmp_path
    )
    argv = ["compare", "--results", str(tmp_path), "--baseline", "engine=deepspeed"]
    assert main([*argv, "--format", "github"]) == 0  # full text, a row a line
    out = capsys.readouterr().out
    assert "contender: rows with engine=dsbench of the same run" in out
    assert "confounded" not in out  # one run: nothing else differs
    lines = {line.split("|")[1].strip(): line for line in out.splitlines() if "train_step" in line}
    assert set(lines) == {"train_step[stage=1]", "train_step[stage=2]"}
    assert "1.500" in lines["train_step[stage=1]"] and "better" in lines["train_step[stage=1]"]
    assert "unchanged" in lines["train_step[stage=2]"]  # +1.3%: within the factor
    assert "rounds = alternating rounds of one launch" in out  # the unit: in-launch rounds
    assert "t(10)+bootstrap 6+6 rounds" in lines["train_step[stage=1]"]


def _with_memory(bid: str, peaks_mib, *, alone=True, device=False):
    """A training-like row over len(peaks_mib) launches, each launch's memory holding the case's
    peak (MiB) alone in fresh ranks, or only the shared process's resident set."""
    row = make_row(bid, [[100.0, 101.0, 99.0] for _ in peaks_mib], unit="samples/s")
    mems = []
    for p in peaks_mib:
        own = {"host_peak_rss_bytes": int(p * 2**20)}
        if device:
            own["device_peak_allocated_bytes"] = int(p * 2**20)
        mems.append({"host_peak_rss_bytes": int((p + 500) * 2**20), "fresh_process": own}
                    if alone else {"host_peak_rss_bytes": int(p * 2**20)})  # fmt: skip
    row["memory"], row["launch_memory"] = mems[0], mems
    return row


def test_peak_memory_is_judged_over_launches_where_the_case_was_measured_alone():
    """A merged training row carries each launch's memory; its peak alone in fresh ranks is
    judged over the launches like time (lower is better): 8% more is worse, the same peaks
    are unchanged; a resident set taken in a shared process gets no memory row at all."""
    bid = "train_step[model=mlp,stage=2]"
    base = _with_memory(bid, [1000, 1001, 999, 1000, 1002, 1000])
    grown = _with_memory(bid, [1080, 1081, 1079, 1080, 1082, 1080])
    rows = compare.compare_rows({bid: base}, {bid: grown})
    assert [r.id for r in rows] == [bid, "train_step.peak_memory[model=mlp,stage=2]"]
    mem = rows[1]
    assert mem.change == "worse" and mem.unit == "MiB" and mem.direction == "lower"
    assert mem.ratio == pytest.approx(1.08, rel=1e-3)
    assert mem.baseline == pytest.approx(1000.33, abs=0.01)
    assert mem.basis.startswith("peak RSS, case alone in fresh ranks; ")
    assert mem.change is compare.Change.WORSE and rows[0].memory is None
    assert mem.memory == compare.MemoryOf(case=bid, kind="peak RSS, case alone in fresh ranks")
    (_, same) = compare.compare_rows({bid: base}, {bid: _with_memory(bid, [1001, 1000] * 3)})
    assert same.change == "unchanged"
    shared = _with_memory(bid, [1000] * 6, alone=False)
    assert [r.id for r in compare.compare_rows({bid: shared}, {bid: shared})] == [bid]
    # a GPU row: the allocator's peak, whatever the resident set did
    gpu = compare.compare_rows({bid: _with_memory(bid, [10] * 6, device=True)},
                               {bid: _with_memory(bid, [20] * 6, device=True)})  # fmt: skip
    assert gpu[1].basis.startswith("device peak allocated; ") and gpu[1].change == "worse"


def test_a_rows_change_and_reasons_are_typed_and_its_basis_is_drawn_from_them():
    """Each row's change is a Change (formatting as today's text), an undecided row's reasons
    are Reasons (its reason headline without particulars), and the basis the tables print is
    its detail plus the rounds that would decide it."""
    bid = "b[x=1]"
    one = {bid: make_row(bid, [1.0])}
    (r,) = compare.compare_rows(one, one)
    assert r.change is compare.Change.INCONCLUSIVE and f"{r.change}" == "inconclusive"
    assert r.reasons == (compare.Reason.ONE_VALUE,) and r.reason == "one value on a side"
    assert r.basis == r.detail and r.basis.startswith("one value on a side (")
    wide = compare.ComparedRow(id=bid, unit="s", direction="lower", baseline=1.0, contender=1.0,
                               ratio=1.02, change=compare.Change.INCONCLUSIVE, low=0.9,
                               high=1.1, detail="spread too wide: the interval reaches across x1.05",
                               to_decide=12, reasons=(compare.Reason.SPREAD_TOO_WIDE,),
                               factor=1.05)  # fmt: skip
    assert wide.basis == wide.detail + "; about 12 rounds a side would decide x1.020"
    assert wide.reason == "spread too wide: the interval reaches across x1.05"
    (gone,) = compare.compare_rows(one, {})
    assert gone.change is compare.Change.ONLY_IN_BASELINE and not gone.comparable
    assert compare.Change.unjudged("skipped", "failed") is compare.Change.SKIPPED_FAILED
    assert compare.Change.unjudged("", "interrupted") is compare.Change.CONTENDER_INTERRUPTED
