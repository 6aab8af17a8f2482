"""dsbench sweep: the sides an axis names, steps found by change-point detection and confirmed
by their neighbours' rounds, one-line errors, and a sweep of three commits end to end whose
step is counted, not timed."""

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import ab_sensitivity as power
from dsbench import ab, results
from dsbench.cli import main
from dsbench.errors import UsageError
from dsbench.stats import Change
from dsbench.sweep import candidates, confirm, parse_axis, report
from dsbench.sweep.rounds import plan_orders

ROOT = Path(__file__).resolve().parents[1]
RELEASES = ["0.17.1", "0.17.2", "0.18.3", "0.18.4", "0.18.5", "0.18.10", "0.19.0"]


def test_an_axis_names_its_sides_in_order():
    def releases():
        return RELEASES

    got = parse_axis("deepspeed=0.17.2,0.18.3..0.18.10", releases=releases)
    assert got == ["deepspeed=0.17.2", "deepspeed=0.18.3", "deepspeed=0.18.4",
                   "deepspeed=0.18.5", "deepspeed=0.18.10"]  # fmt: skip
    assert parse_axis("python=3.11,3.12") == ["python=3.11", "python=3.12"]
    shas = parse_axis("commit=HEAD~2..HEAD", root=ROOT)
    assert len(shas) == 3 and shas[-1].startswith("commit=")


@pytest.mark.parametrize(
    ("axis", "needle"),
    [
        ("torch=2.4,2.5", "KIND one of deepspeed, commit, python"),
        ("deepspeed=0.18.3", "at least two sides"),
        ("deepspeed=0.18.3,,0.18.4", "neither a value nor a range"),
        ("python=3.11..3.12", "one by one"),
        ("deepspeed=0.18.3..0.18.99", "no DeepSpeed release 0.18.99"),
    ],
)
def test_bad_axes_are_one_line_errors(axis, needle):
    with pytest.raises(UsageError, match=needle):
        parse_axis(axis, releases=lambda: RELEASES)


def test_bad_sweep_arguments_exit_2_nothing_written(tmp_path, capsys):
    assert main(["sweep", "--axis", "nope=1,2", "--out", str(tmp_path)]) == 2
    assert main(["sweep", "--axis", "python=3.11,3.12", "--rounds", "1",
                 "--out", str(tmp_path)]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "--rounds must be at least 2" in err[1]
    assert not list(tmp_path.iterdir())


def test_every_round_draws_a_new_order():
    orders = plan_orders(5, 6, seed=3)
    assert all(sorted(o) == list(range(5)) for o in orders)
    assert len({tuple(o) for o in orders}) > 1
    assert plan_orders(5, 6, seed=3) == orders


def _series(levels, rounds=4, sigma=0.02, seed=0):
    rng = np.random.default_rng(seed)
    return [
        [list(m * np.exp(rng.normal(0, sigma) + rng.normal(0, 0.005, 8))) for _ in range(rounds)]
        for m in levels
    ]


def test_a_step_is_found_and_confirmed_and_a_flat_series_has_none():
    steps = [1.0, 1.0, 1.0, 0.8, 0.8, 0.8]
    found = candidates(_series(steps))
    assert found == [2]
    (step,) = confirm("case", _series(steps), found, direction="higher")
    assert (step.before, step.after, step.verdict.change, step.confirmed) == (2, 3, "worse", True)
    assert step.verdict.ratio == pytest.approx(0.8, rel=0.05)
    flat = [candidates(_series([1.0] * 6, seed=s)) for s in range(20)]
    confirmed = [
        t for s, f in enumerate(flat)
        for t in confirm("case", _series([1.0] * 6, seed=s), f, direction="higher") if t.confirmed
    ]  # fmt: skip
    assert not confirmed


def test_a_candidate_that_does_not_hold_is_named_so():
    """Two rounds a side far apart: detection may propose a break that the neighbours' A/B
    cannot confirm."""
    series = [[[1.0], [1.3]], [[1.0], [1.3]], [[1.45], [1.1]]]
    (step,) = confirm("case", series, [1], direction="higher")
    assert not step.confirmed and step.verdict.change == "inconclusive"


def test_without_ruptures_no_candidate_is_looked_for(monkeypatch):
    monkeypatch.setitem(sys.modules, "ruptures", None)
    assert candidates(_series([1.0, 0.5])) is None


@pytest.mark.slow
def test_a_sweep_of_three_commits_finds_and_confirms_the_counted_step(tmp_path):
    """`dsbench sweep` over three commits of a throwaway clone, two rounds in a new order
    each: the third commit's AdamW step costs 20% more on the timing core's counting clock,
    so the series steps there and nowhere else."""
    repo = power.make_commits(ROOT, tmp_path, [0.0, 0.2], counted=True)
    side = ab.SideEnv("current", "current", sys.executable, repo)
    shim = ab.make_shim(repo, tmp_path / "shim")
    out = tmp_path / "results"
    argv = [sys.executable, "-m", "dsbench", "sweep", "--axis",
            "commit=power-base,slow-0,slow-0_2", "--filter", power.CASE, "--rounds", "2",
            "--seed", "1", "--out", str(out)]  # fmt: skip
    proc = subprocess.run(argv, cwd=repo, env=ab.side_environ(side, shim), capture_output=True,
                          text=True, timeout=1200)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = [results.read_run(p) for p in sorted(out.rglob("*.json"))]
    assert sorted(r.sweep.position for r in runs) == [0, 1, 2]
    assert all(len(r.launches) == 2 and r.sweep.rounds == 2 for r in runs)
    assert runs[0].sweep.orders == plan_orders(3, 2, seed=1)
    assert "confirmed steps (1):" in proc.stdout, proc.stdout
    text = " ".join(proc.stdout.split())  # the step's line wraps to the terminal
    (step,) = re.findall(r"slow-0 -> slow-0_2: x(\S+) \[[^\]]*\] (\w+)", text)
    assert step == (f"{1 / 1.2:.3f}", "worse"), text
    assert math.isfinite(float(step[0]))


def _probe_at(step, change=Change.WORSE, calls=None):
    from dsbench.sweep.bisect import Probe

    def probe(side):
        if calls is not None:
            calls.append(side)
        got = change if int(side.rsplit("c", 1)[1]) >= step else Change.UNCHANGED
        return Probe(side=side, change=got, text=got)

    return probe


@pytest.mark.parametrize("step", [1, 4, 5, 8])
def test_bisect_finds_the_first_side_that_differs(step):
    from dsbench.sweep.bisect import search

    sides = [f"commit=c{i}" for i in range(9)]
    calls = []
    found, text = search(sides, _probe_at(step, calls=calls), log=lambda x: None)
    assert found == step and f"commit=c{step}" in text
    assert len(calls) <= 1 + math.ceil(math.log2(len(sides) - 1))


def test_bisect_says_why_it_stops():
    from dsbench.sweep.bisect import Probe, search

    sides = [f"commit=c{i}" for i in range(5)]
    found, text = search(sides, _probe_at(99), log=lambda x: None)
    assert found is None and "nothing to bisect" in text

    def undecided(side):
        change = "inconclusive" if side == "commit=c2" else "worse"
        return Probe(side=side, change=change, text=change)

    found, text = search(sides, undecided, log=lambda x: None)
    assert found is None and "cannot tell which half: commit=c2" in text
    with pytest.raises(UsageError, match="two deepspeed= or two commit= sides"):
        from dsbench.sweep.bisect import between

        between("deepspeed=0.18.3", "commit=HEAD")


def test_a_peak_memory_step_is_bisected_on_its_own_row(monkeypatch):
    """A sweep's memory step (``train_step.peak_memory[...]``): each probe runs the benchmark
    case in fixed rounds and is judged by the memory row, not the timing row beside it."""
    from dsbench.sweep import bisect

    case = "train_step.peak_memory[model=mlp,stage=3]"
    assert bisect.case_filter(case) == r"^train_step\[model=mlp,stage=3\]$"
    seen = []

    def fake_run(argv, **kw):
        seen.append(argv)
        csv_text = ("benchmark,ratio,99% interval,change\n"
                    "train_step[model=mlp,stage=3],0.990,0.9-1.1,inconclusive\n"
                    f'"{case}",0.838,0.80-0.88,better\n')  # fmt: skip
        return subprocess.CompletedProcess(argv, 0, csv_text, "")

    monkeypatch.setattr(bisect.subprocess, "run", fake_run)
    plan = bisect.BisectPlan(good="deepspeed=0.17.2", bad="deepspeed=0.17.4", case=case,
                             suite="training", max_time="20m", blocks=False, rounds=6)  # fmt: skip
    got = bisect.ab_probe(plan, "/tmp")("deepspeed=0.17.4")
    assert (got.change, got.text) == ("better", "x0.838 (0.80-0.88) better")
    argv = seen[0]
    assert argv[argv.index("--filter") + 1] == bisect.case_filter(case)
    assert argv[argv.index("--rounds") + 1] == "6" and "--until-decided" not in argv


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--rounds", "1"], "--rounds must be at least 2"),
        (["--blocks"], "peak memory is judged over launch rounds"),
    ],
)
def test_bad_bisect_arguments_are_one_line_errors(extra, needle, capsys):
    argv = ["bisect", "--good", "deepspeed=0.17.2", "--bad", "deepspeed=0.17.4", "--suite",
            "training", "--case", "train_step.peak_memory[stage=3]", *extra]  # fmt: skip
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_the_releases_page_shows_each_sweep_with_its_confirmed_step(tmp_path):
    """Five sides of a synthetic sweep, a 20% drop from the third to the fourth and a fifth side
    whose rows failed: the page lists the sides, the series table, the confirmed step and a
    chart per case; the report says why the fifth measured nothing."""
    from tests.conftest import make_doc, make_row, write_json
    from tests.test_publish import _publish

    specs = [f"deepspeed=0.18.{i}" for i in range(3, 8)]
    levels = [1.0, 1.0, 1.0, 0.8]
    for pos, (spec, level) in enumerate(zip(specs[:4], levels, strict=True)):
        rounds = _series([level], rounds=3, seed=pos)[0]
        doc = make_doc(f"20261203T0000{pos:02d}Z-00000{pos}", "2026-12-03T00:00:00+00:00",
                       [make_row("adamw[params=1]", rounds)], label=f"sweep-{spec}")  # fmt: skip
        doc["sweep"] = {"id": "sw1", "axis": "deepspeed=0.18.3..0.18.7", "sides": specs,
                        "position": pos, "spec": spec, "rounds": 3,
                        "orders": [[0, 1, 2, 3]] * 3}  # fmt: skip
        write_json(tmp_path / "results" / "testbox" / f"side{pos}.json", doc)
    failing = make_doc("20261203T000009Z-000009", "2026-12-03T00:00:00+00:00",
                       [make_row("adamw[params=1]", [1.0], status="failed")])  # fmt: skip
    failing["sweep"] = {"id": "sw1", "axis": "deepspeed=0.18.3..0.18.7", "sides": specs,
                        "position": 4, "spec": "deepspeed=0.18.7", "rounds": 3}  # fmt: skip
    write_json(tmp_path / "results" / "testbox" / "side4.json", failing)
    out = tmp_path / "site"
    assert _publish(tmp_path / "results", out) == 0
    page = (out / "releases.html").read_text()
    assert "Confirmed steps (1)" in page
    assert "adamw: 0.18.5 -&gt; 0.18.6: x0.8" in page  # named as the table names it
    assert page.count("<img") == 1 and "5 of 5 sides measured, 3 rounds" in page
    runs = [results.read_run(p) for p in sorted((tmp_path / "results").rglob("*.json"))]
    text = report(runs)
    assert "deepspeed=0.18.7: 1 case(s) not measured: boom" in text, text
    assert 'href="releases.html"' in (out / "index.html").read_text()


def test_the_history_page_confirms_a_step_over_commits_within_one_setting(tmp_path):
    """Four runs of one setting over commits (3 launches each), 20% slower from the third on,
    and a run of another Python at the lower level: the history page confirms the one step
    between the second and the third commit and draws its chart; the other setting's run is
    not in that series (an A/B's sides are settings, not a history)."""
    from tests.conftest import make_doc, make_row, write_json
    from tests.test_publish import _publish

    levels = [1.0, 1.0, 0.8, 0.8]
    for pos, level in enumerate(levels):
        doc = make_doc(f"20261205T0000{pos:02d}Z-00000{pos}", f"2026-12-05T00:0{pos}:00+00:00",
                       [make_row("adamw[params=1]", _series([level], rounds=3, seed=pos)[0])],
                       label=f"c{pos + 1}")  # fmt: skip
        doc["launches"] = [{"started": doc["created"]}] * 3
        write_json(tmp_path / "results" / "testbox" / f"c{pos}.json", doc)
    other = make_doc("20261205T000009Z-000009", "2026-12-05T00:09:00+00:00",
                     [make_row("adamw[params=1]", _series([0.8], rounds=3, seed=9)[0])],
                     label="py312", env={"python": {"version": "3.12.1"}})  # fmt: skip
    other["launches"] = [{"started": other["created"]}] * 3
    write_json(tmp_path / "results" / "testbox" / "py312.json", other)
    out = tmp_path / "site"
    assert _publish(tmp_path / "results", out) == 0
    page = (out / "history.html").read_text()
    assert "Steps over 4 runs of several launches in one setting" in page
    assert "Confirmed steps (1)" in page
    assert "adamw: c2 -&gt; c3: x0.8" in page
    assert 'alt="series of adamw[params=1]"' in page


def test_a_series_of_peak_memory_steps_where_the_case_alone_grew():
    """Each side's launches carry the case's peak alone in fresh ranks: the series gets a
    memory line (MiB, lower is better) beside the timing one, and a 10% jump between the
    third and fourth sides is found and confirmed there; the timing line has no step."""
    from dsbench.sweep import series_over
    from tests.conftest import make_doc
    from tests.test_compare import _with_memory

    rng = np.random.default_rng(0)
    runs = []
    for pos, level in enumerate([1000, 1000, 1000, 1100, 1100]):
        row = _with_memory("train_step[stage=2]", list(level + rng.normal(0, 1, 6)))
        doc = make_doc(f"20261205T0000{pos:02d}Z-00000{pos}", "2026-12-05T00:00:00+00:00", [row])
        runs.append(results.Run(path=Path(f"side{pos}.json"), record=results.validate(doc, "t")))
    labels = [f"deepspeed=0.18.{i}" for i in range(3, 8)]
    timing, memory = series_over(labels, runs)
    assert memory.case == "train_step.peak_memory[stage=2]" and memory.unit == "MiB"
    assert [(s.before, s.after, s.verdict.change) for s in memory.steps if s.confirmed] == [
        (2, 3, "worse")
    ]
    assert not [s for s in timing.steps if s.confirmed]


def test_a_side_that_ran_no_case_in_its_first_round_is_left_out_of_the_rest(tmp_path):
    """A release whose first launch fails every case (DeepSpeed 0.18.7-0.18.9 with torch 2.13
    on CPU) would fail alike in each round: its one file says why, its rounds are not spent."""
    from tests.conftest import make_doc, make_row, write_json

    sides = []
    for i, status in enumerate(["ok", "failed"]):
        doc = make_doc(f"20261206T00000{i}Z-00000{i}", "2026-12-06T00:00:00+00:00",
                       [make_row("adamw[params=1]", [1.0], status=status)])  # fmt: skip
        write_json(tmp_path / f"doc{i}.json", doc)
        fake = tmp_path / f"python{i}"  # stands in for the side's interpreter: writes its file
        fake.write_text(f'#!/bin/sh\nwhile [ "$1" != --out ]; do shift; done\n'
                        f'cp {tmp_path}/doc{i}.json "$2"\n')  # fmt: skip
        fake.chmod(0o755)
        sides.append(ab.SideEnv(f"fake={i}", "current", str(fake), ROOT))
    failed, lines = {}, []
    per_side = ab.run_rounds(sides, rounds=3, verb=["run"], workdir=tmp_path,
                             progress=lines.append, plan=[0, 1] * 3, names=["a", "b"],
                             failed=failed)  # fmt: skip
    assert [len(x) for x in per_side] == [3, 1]
    assert list(failed) == [1] and "b (fake=1) ran none of the cases" in failed[1]
    assert any("left out of the rounds to come" in line for line in lines), lines
