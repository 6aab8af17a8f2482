"""The runner: a failing or skipped case does not stop the others; the run still writes its file."""

import json

import pytest

from dsbench import runner, suites
from dsbench.cli import main
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
