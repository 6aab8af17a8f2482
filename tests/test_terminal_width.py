"""Tables that fit a terminal (issue 40 item 3): the tables of `dsbench run`, `compare`, `ab`,
`sweep` and `bisect`, rendered from real runs at COLUMNS=80 and COLUMNS=100, keep every line
within the width, carry their full reasons in numbered notes under the table, and put the
summary line (and any failure) before the table. The machine-readable formats keep the full
text (the golden tables of tests/test_compare.py)."""

import dataclasses
import os
import shutil

import pytest
from rich.cells import cell_len

from dsbench import compare, results, suites
from dsbench.cli import main
from dsbench.cli.compare import build_report, print_report, terminal_text
from dsbench.compare import terminal
from dsbench.measure import runner
from dsbench.suites.base import Benchmark, Case, Metric, Work
from dsbench.sweep import report as sweep_report
from dsbench.sweep.bisect import BisectPlan, Probe, case_filter, result_text
from tests.conftest import FIXTURE_RESULTS, make_doc, make_row, write_json

WIDTHS = [80, 100]
AB_PAIR = ("ab-20261201T134620Z-d3e9e5-baseline", "ab-20261201T134620Z-d3e9e5-contender")
"""A real `dsbench ab` pair of the fixtures: DeepSpeed 0.18.3 vs 0.18.4, the training suite's
12 cases, whose ids run to 130 characters (314 columns in the github table)."""
LONG_ID = ("train_step[comm=native,dtype=float32,engine=deepspeed,grad_accum=2,kernels=torch,"
           "micro_batch=16,model=mlp,ranks=2,stage=1]")  # fmt: skip
CEILING_FAILURE = ("56.65 GB/s is above this run's mem_bandwidth ceiling 52.65 GB/s "
                   "(stream[kernel=axpy]; at least 105.0% of it at 99% confidence): a bug to "
                   "explain")  # fmt: skip


@pytest.fixture(params=WIDTHS)
def columns(request, monkeypatch):
    """COLUMNS as a user's terminal sets it; the width every table must fit."""
    monkeypatch.setenv("COLUMNS", str(request.param))
    return request.param


def _fits(text: str, limit: int) -> None:
    wide = [(cell_len(line), line) for line in text.splitlines() if cell_len(line) > limit]
    assert wide == [], f"lines over {limit} columns: {wide}"


def _header_index(lines: list[str], first: str) -> int:
    """The index of the table's header line (the line starting with its first header)."""
    return next(i for i, line in enumerate(lines) if line.split()[:1] == [first])


def _notes(lines: list[str]) -> dict[str, str]:
    """The numbered notes under a table, their wrapped lines joined: {'[1]': 'text'}."""
    notes: dict[str, str] = {}
    last = None
    for line in lines:
        if line.startswith("[") and "] " in line and line[1 : line.index("]")].isdigit():
            last, _, text = line.partition(" ")
            notes[last] = text
        elif last and line.startswith("    "):
            notes[last] += " " + line.strip()
        else:
            last = None
    return notes


def test_the_width_is_the_terminals_at_most_100(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert terminal.width() == 80
    monkeypatch.setenv("COLUMNS", "200")
    assert terminal.width() == 100  # never wider than 100
    monkeypatch.delenv("COLUMNS")
    # not a terminal (a pipe, a file): shutil falls back to the size it is given
    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback: os.terminal_size(fallback))
    assert terminal.width() == 100


def test_notes_share_a_number_for_the_same_reason():
    notes = terminal.Notes()
    assert [notes.ref(t) for t in ("spread too wide", "too few samples", "spread too wide")] == [
        "[1]",
        "[2]",
        "[1]",
    ]
    assert notes.ref("") == ""
    assert notes.lines(40) == ["[1] spread too wide", "[2] too few samples"]


def test_shared_parameters_leave_the_ids_for_a_caption():
    ids = [LONG_ID, LONG_ID.replace("stage=1", "stage=2"), "adamw[impl=torch,params=1000000]",
           "train_step.peak_memory" + LONG_ID.removeprefix("train_step")]  # fmt: skip
    labels, caption = terminal.short_ids(ids, [*ids[:3], LONG_ID])  # the memory row's case
    assert labels == ["train_step[stage=1]", "train_step[stage=2]",
                      "adamw[impl=torch,params=1000000]",  # alone: nothing shared to leave out
                      "train_step.peak_memory[stage=1]"]  # fmt: skip
    shared = "comm=native, dtype=float32, engine=deepspeed, grad_accum=2, kernels=torch"
    assert caption == [f"every train_step case has {shared}, micro_batch=16, model=mlp, ranks=2"]


@pytest.mark.parametrize("limit", [40, 60, 80, 100])
def test_any_table_fits_by_wrapping_stacking_or_blocks(limit):
    """Wide values are split into blocks of columns, each with the case, and a long id wraps
    after its commas: every line fits, every value is shown once per row."""
    headers = ["case", *(f"0.18.{i}" for i in range(16))]
    rows = [[LONG_ID, *(f"{0.9 + i / 100:.3f}" for i in range(16))]] * 2
    text = terminal.table(headers, rows, limit=limit, right=range(1, 17))
    _fits(text, limit)
    assert all(text.count(f"{0.9 + i / 100:.3f}") == 2 for i in range(16))
    assert all(text.split().count(h) == 1 for h in headers[1:])
    blocks = text.split().count("case")  # each block of columns repeats the case
    assert text.count("train_step[comm=native,") == 2 * blocks


def test_a_shell_command_is_continued_and_pastes_as_one():
    words = ["dsbench", "ab", "--baseline", "deepspeed=0.18.3", "--contender", "deepspeed=0.18.4",
             "--suite", "training", "--until-decided", "--blocks"]  # fmt: skip
    lines = terminal.command_lines(words, 40)
    _fits("\n".join(lines), 40)
    assert all(line.endswith(" \\") for line in lines[:-1]) and len(lines) > 1
    assert " ".join(line.removesuffix(" \\").strip() for line in lines) == " ".join(words)


def test_compare_of_a_real_pair_fits_with_its_reasons_as_notes(columns, capsys):
    argv = ["compare", "--results", str(FIXTURE_RESULTS), "--baseline", AB_PAIR[0],
            "--contender", AB_PAIR[1]]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    _fits(out, columns)
    lines = out.splitlines()
    table = _header_index(lines, "benchmark")
    summary = next(i for i, line in enumerate(lines) if "inconclusive (99% interval" in line)
    assert summary < table  # the summary line first
    rep = build_report(results_of(), AB_PAIR[0], AB_PAIR[1], factor=1.05)
    notes = _notes(lines[table:])
    for r in rep.rows:  # each row's full reason is a note, and the row names it
        reason = r.basis.split("; about ")[0]
        (mark,) = [m for m, text in notes.items() if text == reason]
        assert any(mark in line for line in lines[table:] if "samples/s" in line)
    assert len(notes) < len(rep.rows)  # identical reasons share one note
    assert "every train_step case has comm=native, dtype=float32" in " ".join(lines[:table])
    assert "train_step[kernels=torch,model=mlp,stage=1]" in out


def results_of():
    from dsbench.results import asv as asv_results

    return asv_results.load_all_runs(str(FIXTURE_RESULTS))


@pytest.mark.parametrize("fmt", ["csv", "markdown", "github"])
def test_the_machine_readable_formats_keep_the_full_text(fmt, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    argv = ["compare", "--results", str(FIXTURE_RESULTS), "--baseline", AB_PAIR[0],
            "--contender", AB_PAIR[1], "--format", fmt]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    rep = build_report(results_of(), AB_PAIR[0], AB_PAIR[1], factor=1.05)
    assert compare.render(rep, fmt) in out
    for r in rep.rows:
        assert any(r.id in line and r.basis in line for line in out.splitlines())
    assert max(map(cell_len, out.splitlines())) > 250  # unchanged: as wide as its texts


def test_ab_prints_its_comparison_fitting_summary_first(columns, capsys):
    """`dsbench ab`'s report (print_report, as `dsbench ab` calls it after its rounds) of the
    fixtures' real A/B, with a regression: the summary and the regression come first."""
    runs = results_of()
    base, cont = (next(r for r in runs if r.label == label) for label in AB_PAIR)
    notes = [f"{role}: deepspeed={run.fields['deepspeed']} — pip install deepspeed=="
             f"{run.fields['deepspeed']} in .dsbench/envs/deepspeed-{run.fields['deepspeed']}; "
             f"{run.path}" for role, run in (("baseline", base), ("contender", cont))]  # fmt: skip
    rep = compare.report(base, cont, axes={"deepspeed"}, notes=notes, runs=runs)
    worse = compare.regressions(rep.rows)
    assert worse == []  # the real pair: every row inconclusive; plant one regression
    rep.rows[0] = dataclasses.replace(rep.rows[0], change=compare.Change.WORSE)
    assert print_report(rep, "terminal", fail_on_regression=True) == 1
    out = capsys.readouterr().out
    _fits(out, columns)
    lines = out.splitlines()
    table = _header_index(lines, "benchmark")
    first = [i for i, line in enumerate(lines) if line.startswith("dsbench: 1 regression(s)")]
    summary = [i for i, line in enumerate(lines) if line.startswith("0 better, 0 worse")]
    assert first and summary and max(first + summary) < table
    assert "baseline: deepspeed=0.18.3" in out


GRID = {"comm": ["native"], "dtype": ["float32"], "engine": ["deepspeed"], "grad_accum": [2],
        "kernels": ["torch", "best"], "micro_batch": [16], "model": ["mlp"], "ranks": [2],
        "stage": [1, 2]}  # fmt: skip
METRIC = Metric(name="samples_per_s", unit="samples/s", direction="higher",
                value=lambda w, t: w.items / t)  # fmt: skip


def _long_toy(monkeypatch) -> None:
    """A benchmark with training-suite-like ids that fails one case with a ceiling's message."""

    def setup(params, ctx):
        if params["stage"] == 2:
            raise RuntimeError(CEILING_FAILURE)
        return Case(fn=lambda: sum(range(100)), work=Work(items=100))

    toy = Benchmark(
        name="train_step",
        description="training-suite-like ids, one case failing",
        grid=lambda suite, ctx: dict(GRID),
        setup=setup,
        metrics=(METRIC,),
    )
    monkeypatch.setattr(suites, "BENCHMARKS", {"train_step": toy})
    monkeypatch.setattr(runner, "BENCHMARKS", {"train_step": toy})


@pytest.mark.slow  # two real runs: minutes on a loaded 2-core machine
def test_run_prints_failures_and_summary_first_and_fits(columns, monkeypatch, tmp_path, capfd):
    """Two real `dsbench run`s of a benchmark with long ids, one case failing: each prints its
    summary line and failure before its table, the failure's message in full as a note, and
    the second its comparison with the first, summary first; every line fits."""
    _long_toy(monkeypatch)
    out = tmp_path / "results"
    argv = ["run", "--suite", "smoke", "--out", str(out), "--no-progress"]
    assert main([*argv, "--label", "first"]) == 1
    first = capfd.readouterr()
    assert main([*argv, "--label", "second"]) == 1
    second = capfd.readouterr()
    for got in (first, second):
        _fits(got.out, columns)
        _fits(got.err, columns)
        lines = got.out.splitlines()
        table = _header_index(lines, "benchmark")
        assert lines[0] == "2 ok, 2 failed" and table > 0
        below = " ".join(" ".join(lines[table:]).split())  # the notes, however they wrap
        assert f"RuntimeError: {CEILING_FAILURE}" in below
        assert "every train_step case has comm=native, dtype=float32" in " ".join(lines[:table])
        assert "dsbench: 2 benchmark(s) failed: train_step[" in " ".join(got.err.split())
    lines = second.out.splitlines()
    start = next(i for i, line in enumerate(lines) if "compared with the newest earlier" in line)
    rest = lines[start:]
    summary = next(i for i, line in enumerate(rest) if line.startswith("0 better, 0 worse"))
    assert summary < _header_index(rest, "benchmark")
    assert "2 inconclusive" in rest[summary]
    assert "2 failed, skipped or unlike" in " ".join(" ".join(rest).split())


def test_runs_comparison_with_the_previous_run_fits_summary_first(columns, tmp_path, capsys):
    """`dsbench run`'s comparison with the newest earlier run, of two real runs (the fixtures'
    A/B sides copied as one machine's runs of the training suite)."""
    import json

    from dsbench.cli.run import _compare_with_previous
    from dsbench.records import RunRecord

    folder = tmp_path / "results" / "devbox-2c-epyc"
    folder.mkdir(parents=True)
    for run in (r for r in results_of() if r.label in AB_PAIR):
        shutil.copy(run.path, folder / run.path.name)
    newest = max(folder.glob("*.json"))
    _compare_with_previous(tmp_path / "results", RunRecord.from_json(json.loads(
        newest.read_text())))  # fmt: skip
    out = capsys.readouterr().out
    _fits(out, columns)
    lines = out.splitlines()
    summary = next(i for i, line in enumerate(lines) if line.startswith("0 better, 0 worse"))
    assert 0 < summary < _header_index(lines, "benchmark")
    flat = " ".join(out.split())
    assert (
        "compared with the newest earlier run on this hardware: run 20261201T131615Z-1ea362" in flat
    )
    assert "[1] spread too wide: the interval reaches across x1.05" in lines


def test_the_run_table_fits_with_failures_as_notes(columns):
    """The run's table of a real run with one row failed as the newcomer's AdamW was."""
    from dsbench.measure.run_table import summary_line, summary_table

    run = next(r for r in results_of() if r.label == "efficiency-after")
    rows = list(run.rows.values())
    rows[1] = dataclasses.replace(rows[1], status="failed", error=CEILING_FAILURE)
    assert summary_line(rows) == "17 ok, 1 failed"
    text = summary_table(rows)
    _fits(text, columns)
    lines = text.splitlines()
    notes = _notes(lines)
    assert notes == {"[1]": CEILING_FAILURE}
    assert sum("failed [1]" in line for line in lines) == 1


def test_the_run_table_of_a_real_run_fits_with_shares_above_peak_as_notes(columns):
    from dsbench.measure.run_table import summary_table

    run = next(r for r in results_of() if r.label == "single-a")
    text = summary_table(list(run.rows.values()))
    _fits(text, columns)
    lines = text.splitlines()
    assert "[1] above the measured peak" in lines  # adamw and gemm at 163.7% and 142.4%
    assert sum("% [1]" in line for line in lines) == 2
    assert "metrics: bandwidth (adamw); throughput (gemm); busbw (allreduce," in text


def _sweep_runs(tmp_path, n_sides=16):
    """A synthetic sweep over ``n_sides`` releases, a 20% drop at the tenth, cases with long
    ids, one side whose rows failed with a long message."""
    import random

    specs = [f"deepspeed=0.18.{i}" for i in range(n_sides)]
    cases = [LONG_ID, LONG_ID.replace("stage=1", "stage=3"), "adamw[impl=torch,params=1000000]"]
    for pos, spec in enumerate(specs):
        rng = random.Random(pos)
        level = 1.0 if pos < 9 else 0.8
        rows = [
            make_row(c, [[level * (1 + rng.gauss(0, 0.01)) for _ in range(8)] for _ in range(3)])
            if pos != n_sides - 1 else make_row(c, [], status="failed")
            for c in cases
        ]  # fmt: skip
        doc = make_doc(f"20261203T0000{pos:02d}Z-0000{pos:02d}", "2026-12-03T00:00:00+00:00",
                       rows, label=f"sweep-{spec}")  # fmt: skip
        doc["sweep"] = {"id": "sw1", "axis": f"deepspeed=0.18.0..0.18.{n_sides - 1}",
                        "sides": specs, "position": pos, "spec": spec, "rounds": 3,
                        "orders": [list(range(n_sides))] * 3}  # fmt: skip
        write_json(tmp_path / "results" / "testbox" / f"side{pos}.json", doc)
    return [results.read_run(p) for p in sorted((tmp_path / "results").rglob("*.json"))]


def test_a_wide_sweep_fits_in_blocks_of_sides_with_its_steps_first(columns, tmp_path):
    text = sweep_report(_sweep_runs(tmp_path), factor=1.05)
    _fits(text, columns)
    lines = text.splitlines()
    table = _header_index(lines, "case")
    assert lines[0].startswith("confirmed steps (3):")
    steps = [line for line in lines[:table] if "0.18.8 -> 0.18.9" in line]
    assert len(steps) == 3 and any(s.strip().startswith("train_step[stage=3]:") for s in steps)
    assert "deepspeed=0.18.15: 3 case(s) not measured: boom" in lines[:table]
    for i in range(16):  # every side's column, once
        assert sum(f"0.18.{i}" in line.split() for line in lines[table:]) == 1


def test_bisects_result_and_probes_fit_but_the_filter_regex(columns):
    plan = BisectPlan(good="deepspeed=0.17.2", bad="deepspeed=0.18.8", case=LONG_ID,
                      suite="training", rounds=None, blocks=True, max_time="20m")  # fmt: skip
    sides = [f"deepspeed=0.18.{i}" for i in range(9)]
    probes = [Probe(s, c, f"x{r:.3f} (0.870-0.950) {c}") for s, c, r in
              [(sides[8], "worse", 0.91), (sides[4], "worse", 0.9), (sides[2], "unchanged", 1.0),
               (sides[3], "worse", 0.9)]]  # fmt: skip
    text = result_text("first side that differs: deepspeed=0.18.3 (after deepspeed=0.18.2, "
                       "worse)", probes, plan, sides, 3)  # fmt: skip
    lines = text.splitlines()
    assert lines[0].startswith("first side that differs: deepspeed=0.18.3")  # the result first
    (regex,) = [line for line in lines if cell_len(line) > columns]  # a word, kept whole to paste
    assert regex.split() == [f"'{case_filter(LONG_ID)}'", "\\"]
    assert all(p.text in text and p.side in text for p in probes)
    command = " ".join(line.removesuffix("\\").strip() for line in lines[lines.index("reproduce:")
                       + 1 :])  # fmt: skip
    assert command.startswith("dsbench ab --baseline deepspeed=0.18.2 --contender deepspeed=0.18.3")
    assert command.endswith("--until-decided --max-time 20m --blocks")


def test_a_terminal_report_of_no_rows_says_so():
    rep = compare.Report(notes=[], verdict="0 better", rows=[], counts={})
    assert terminal_text(rep, limit=80) == "0 better\n\n(no rows)"
