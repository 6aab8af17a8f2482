"""The runner: a failing or skipped case does not stop the others; the run still writes its file."""

import json

import pytest

from dsbench import suites
from dsbench.cli import main
from dsbench.measure import runner
from dsbench.suites.base import Benchmark, Case, Metric, Skip, Work


def _setup(params, ctx):
    if params["mode"] == "boom":
        raise RuntimeError("kaboom in setup")
    if params["mode"] == "skip":
        raise Skip("not on this machine")
    return Case(fn=lambda: sum(range(100)), work=Work(items=100))


TOY = Benchmark(
    name="toy",
    description="a benchmark that fails, skips or works by parameter",
    grid=lambda suite, ctx: {"mode": ["boom", "skip", "ok"]},
    setup=_setup,
    metrics=(
        Metric(name="rate", unit="items/s", direction="higher", value=lambda w, t: w.items / t),
    ),
)


@pytest.fixture
def only_toy(monkeypatch):
    monkeypatch.setattr(suites, "BENCHMARKS", {"toy": TOY})
    monkeypatch.setattr(runner, "BENCHMARKS", {"toy": TOY})


def test_failures_are_rows_and_the_rest_still_runs(only_toy, tmp_path, capsys):
    out = tmp_path / "results"
    code = main(["run", "--suite", "smoke", "--out", str(out), "--no-compare"])
    assert code == 1
    err = capsys.readouterr().err
    assert "1 benchmark(s) failed: toy[mode=boom]" in err
    (path,) = out.rglob("*.json")
    rows = {r["id"]: r for r in json.loads(path.read_text())["benchmarks"]}
    assert rows["toy[mode=boom]"]["status"] == "failed"
    assert rows["toy[mode=boom]"]["error"] == "RuntimeError: kaboom in setup"
    assert (rows["toy[mode=skip]"]["status"], rows["toy[mode=skip]"]["reason"]) == (
        "skipped",
        "not on this machine",
    )
    ok = rows["toy[mode=ok]"]
    assert ok["status"] == "ok" and ok["value"] > 0 and ok["pct_of_peak"] is None


def test_out_json_path_is_used_exactly_and_never_overwritten(only_toy, tmp_path, capsys):
    target = tmp_path / "one.json"
    main(["run", "--suite", "smoke", "--out", str(target), "--filter", "mode=ok"])
    first = target.read_bytes()
    assert json.loads(first)["benchmarks"][0]["id"] == "toy[mode=ok]"
    assert main(["run", "--suite", "smoke", "--out", str(target)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert target.read_bytes() == first


def test_filter_is_a_regex_over_case_ids(only_toy):
    ctx = suites.Context()
    assert [p.id for p in runner.plan("smoke", ctx, "skip|ok")] == [
        "toy[mode=skip]",
        "toy[mode=ok]",
    ]
    with pytest.raises(Exception, match="not a valid regular expression"):
        runner.plan("smoke", ctx, "(")


def test_interleaved_groups_pair_cases_that_differ_only_in_the_interleaved_parameter():
    bench = Benchmark(
        name="pair",
        description="",
        grid=lambda suite, ctx: {},
        setup=_setup,
        metrics=TOY.metrics,
        ranks_param="ranks",
        interleave=("engine",),
    )
    cases = [
        {"engine": "x", "stage": 1, "ranks": 2},
        {"engine": "y", "stage": 1, "ranks": 2},
        {"engine": "x", "stage": 2, "ranks": 2},
        {"engine": "y", "stage": 2, "ranks": 2},
        {"engine": "x", "stage": 3, "ranks": 2},
    ]
    assert runner.interleaved_groups(bench, cases, rounds=3) == [[0, 1], [2, 3], [4]]
    assert runner.interleaved_groups(bench, cases, rounds=1) == [[i] for i in range(5)]
    assert runner.interleaved_groups(TOY, cases, rounds=3) == [[i] for i in range(5)]


@pytest.mark.slow
def test_interleaved_cases_alternate_in_rounds_and_pool_their_samples():
    """Two sides of each case are set up a b, b a, a b (fresh setup per round), every rank does
    the same, and each row pools the rounds' samples and says how many rounds it had."""
    from dsbench.hardware import get_profile
    from dsbench.measure.timing import TimingConfig
    from dsbench.procs.distributed import spawn_ranks
    from dsbench.suites.base import Context

    cases = [
        {"side": s, "size": n, "ranks": 2} for n in (8, 16) for s in ("a", "b")
    ]  # fmt: skip
    config = TimingConfig(
        warmup_s=0.0, min_warmup=1, min_reps=6, max_reps=12, budget_s=0.05, rounds=3
    )
    payload = {
        "benchmark": "two_sided",
        "cases": cases,
        "ctx": Context(suite="smoke"),
        "profile": get_profile("cpu"),
        "config": config,
    }
    got = {}
    spawn_ranks(
        "tests._interleave_workers:run",
        2,
        payload,
        on_message=lambda rank, msg: got.__setitem__(rank, msg),
        timeout_s=120,
    )
    assert got[0]["setups"] == got[1]["setups"] == [
        "a8", "b8", "b8", "a8", "a8", "b8", "a16", "b16", "b16", "a16", "a16", "b16"
    ]  # fmt: skip
    assert got[1]["rows"] == []  # only rank 0 sends rows
    rows = dict(got[0]["rows"])
    assert sorted(rows) == [0, 1, 2, 3]
    for index, row in rows.items():
        assert row.ok, row  # a typed row, as the runner keeps it up to the writer
        assert row.params == cases[index]
        assert row.timing.rounds == 3
        assert row.timing.warmup_reps >= 3  # each round warms up on its own
        assert len(row.timing.samples) >= 3 * 2  # per round: min_reps / rounds = 2
        assert row.notes.to_json() == {"side": cases[index]["side"]}
        memory = row.memory  # the smallest round's addition, never above the largest peak
        assert isinstance(memory.host_peak_added_bytes, int)
        assert memory.host_peak_added_bytes <= memory.host_peak_rss_bytes


@pytest.mark.slow
def test_memory_pass_measures_one_case_in_fresh_ranks():
    """The fresh-process memory pass sets one case up on new ranks, runs it and sends the
    largest rank's peak and what the case added (rank 0 only)."""
    from dsbench.procs.distributed import spawn_ranks
    from dsbench.suites.base import Context

    got = []
    spawn_ranks(
        "tests._interleave_workers:memory",
        2,
        {"benchmark": "two_sided", "case": {"side": "a", "size": 8, "ranks": 2},
         "ctx": Context(suite="smoke"), "profile": None},
        on_message=lambda rank, msg: got.append((rank, msg)),
        timeout_s=120,
    )  # fmt: skip
    assert [rank for rank, _ in got] == [0]
    memory = got[0][1]
    assert memory["host_peak_rss_bytes"] > 0 and memory["host_peak_reset"] in (True, False)
    assert 0 <= memory["host_peak_added_bytes"] <= memory["host_peak_rss_bytes"]
