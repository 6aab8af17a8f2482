"""Ceilings measured side by side (dsbench.suites.ceilings): a run times the ceilings its rows
need as rows of its own, divides by them with an interval, and fails a row that beats its
ceiling. The planted benchmarks count 100 times (or a hundredth of) the bytes a copy moves, so
the verdicts hold whatever the machine's load: no assertion here rests on timing."""

import datetime
import json
from pathlib import Path

import pytest

from dsbench import ab, results, suites
from dsbench.cli import main
from dsbench.errors import UsageError
from dsbench.hardware.ceilings import _age_text
from dsbench.measure import runner
from dsbench.publish.pages.runs import peak_notes, rows_table
from dsbench.stats import quantile_ci
from dsbench.suites.base import Benchmark, Case, Work, gbps
from dsbench.suites.ceilings import CEILING_QUANTILE, CEILINGS, STREAM_KERNELS

NBYTES = 64 * 2**20


def _copy(factor: float):
    def setup(params, ctx):
        import torch

        src = torch.ones(NBYTES // 4)
        dst = torch.empty_like(src)
        return Case(fn=lambda: dst.copy_(src), work=Work(bytes=factor * 2 * NBYTES))

    return setup


def _bench(name: str, factor: float) -> Benchmark:
    return Benchmark(
        name=name,
        description=f"a 64 MiB copy counting {factor:g} times its bytes",
        grid=lambda suite, ctx: {"size": [NBYTES]},
        setup=_copy(factor),
        metrics=(gbps("bandwidth", peak="mem_bandwidth"),),
    )


PLANTED = {b.name: b for b in (_bench("overcounted", 100.0), _bench("undercounted", 0.01))}


@pytest.fixture
def planted(monkeypatch):
    monkeypatch.setattr(suites, "BENCHMARKS", PLANTED)
    monkeypatch.setattr(runner, "BENCHMARKS", PLANTED)


def test_a_run_divides_by_its_own_ceilings_and_fails_a_row_above_them(planted, tmp_path, capsys):
    out = tmp_path / "results"
    code = main(["run", "--suite", "smoke", "--ceilings", "run", "--out", str(out),
                 "--no-compare", "--no-progress"])  # fmt: skip
    assert code == 1
    err = " ".join(capsys.readouterr().err.split())  # wrapped to the terminal
    assert "1 benchmark(s) failed: overcounted[size=67108864]" in err
    (path,) = out.rglob("*.json")
    doc = json.loads(path.read_text())
    rows = {r["id"]: r for r in doc["benchmarks"]}
    # the memory ceiling's rows, in slices around the two benchmarks (before, between, after)
    stream = [rows[f"stream[kernel={k}]"] for k in STREAM_KERNELS]
    assert all(r["status"] == "ok" and len(r["rounds"]) == 3 for r in stream)
    tops = {r["id"]: quantile_ci(r["samples"], CEILING_QUANTILE) for r in stream}
    best = max(stream, key=lambda r: tops[r["id"]][0])
    ceiling, c_low, c_high, _ = tops[best["id"]]
    figure = doc["profile"]["memory_bandwidth_gbps"]
    assert figure["value"] == ceiling and figure["measured"] is True
    assert figure["source"].startswith("measured in this run, interleaved with its benchmarks")

    bad = rows["overcounted[size=67108864]"]
    assert bad["status"] == "failed"
    assert "above this run's mem_bandwidth ceiling" in bad["error"]
    assert best["id"] in bad["error"] and "byte count overstates" in bad["error"]

    good = rows["undercounted[size=67108864]"]
    metric = good["metrics"]["bandwidth"]
    low, high = metric["pct_ci99"]
    assert good["status"] == "ok" and low <= good["pct_of_peak"] <= high < 100
    assert good["pct_of_peak"] == pytest.approx(100 * good["value"] / ceiling)
    assert c_low <= ceiling <= c_high
    assert good["peak"]["row"] == best["id"] and good["peak"]["ci99"] == [c_low, c_high]
    # the run's page: the share with its interval, and what it is a share of
    run = results.read_run(path)
    page = str(rows_table(run)) + "".join(map(str, peak_notes(run)))
    assert f"({low:.1f}-{high:.1f})" in page
    assert "% of peak is against ceilings measured in this run" in page
    assert metric["peak"]["value"] == ceiling


def test_cached_ceilings_time_no_ceiling_rows(planted, tmp_path, monkeypatch):
    """The smoke suite (the tests') and dsbench ab's launches divide by the cached calibration,
    labelled with its age, and time no ceiling rows."""
    monkeypatch.setenv("DSBENCH_CACHE_DIR", str(tmp_path / "cache"))
    calibration = {"version": 4, "entries": {}}
    from dsbench.hardware.ceilings import calibration_key

    calibration["entries"][calibration_key("cpu")] = {
        "memory_bandwidth_gbps": 1e6, "copy_bandwidth_gbps": 5e5, "matmul_tflops": {},
        "methods": {}, "date": "2026-01-01", "device": "cpu",
    }  # fmt: skip
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "calibration.json").write_text(json.dumps(calibration))
    out = tmp_path / "one.json"
    assert main(["run", "--suite", "smoke", "--out", str(out), "--filter", "undercounted",
                 "--no-progress"]) == 0  # fmt: skip
    doc = json.loads(out.read_text())
    assert [r["name"] for r in doc["benchmarks"]] == ["undercounted"]
    source = doc["profile"]["memory_bandwidth_gbps"]["source"]
    assert source.startswith("measured on this machine on 2026-01-01 by dsbench (")
    assert "days old; a cached calibration" in source


def test_ceiling_modes(monkeypatch):
    assert runner.CEILING_MODES == ("run", "cached")
    monkeypatch.delenv("DSBENCH_CEILINGS", raising=False)
    assert runner.ceiling_mode("quick") == "run" and runner.ceiling_mode("smoke") == "cached"
    assert runner.ceiling_mode("smoke", "run") == "run"
    monkeypatch.setenv("DSBENCH_CEILINGS", "cached")
    assert runner.ceiling_mode("quick") == "cached"
    monkeypatch.setenv("DSBENCH_CEILINGS", "sometimes")
    with pytest.raises(UsageError, match="ceilings 'sometimes' is not one of run, cached"):
        runner.ceiling_mode("quick")
    side = ab.SideEnv("current", "current", "python", Path("."))
    monkeypatch.delenv("DSBENCH_CEILINGS")
    assert ab.side_environ(side, Path("shim"))["DSBENCH_CEILINGS"] == "cached"


def test_a_bad_ceilings_argument_is_a_usage_error(capsys):
    assert main(["run", "--ceilings", "often"]) == 2
    err = capsys.readouterr().err
    assert "--ceilings: invalid choice: 'often'" in err and "run" in err and "cached" in err


def test_the_age_of_a_cached_calibration():
    today = datetime.date(2026, 12, 3)
    assert _age_text("2026-12-03", today) == "today"
    assert _age_text("2026-12-02", today) == "1 day old"
    assert _age_text("2026-11-21", today) == "12 days old"
    assert _age_text("an unknown date", today) == "of unknown age"


def test_ceiling_rows_are_no_suites_cases():
    assert not set(CEILINGS) & set(suites.BENCHMARKS)
    assert all(b.suites == () for b in CEILINGS.values())
