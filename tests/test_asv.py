"""asv discovers every benchmark, and a real `asv run --python=same` in 2 rounds records a value
a round that `dsbench compare` reads next to a `dsbench run` of the same case."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
ASV = shutil.which("asv", path=str(Path(sys.executable).parent))


def _head() -> str | None:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


@pytest.fixture(scope="module")
def asv_setup(tmp_path_factory):
    if ASV is None:
        pytest.skip("asv is not installed in this environment")
    if _head() is None:
        pytest.skip("not a git checkout: asv needs a commit")
    tmp = tmp_path_factory.mktemp("asv")
    text = (ROOT / "asv.conf.json").read_text()
    conf = json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))
    conf.update(
        repo=str(ROOT),
        benchmark_dir=str(ROOT / "benchmarks"),
        results_dir=str(tmp / "results" / "asv"),  # as in the project: <results>/asv
        html_dir=str(tmp / "html"),
        env_dir=str(tmp / "env"),
    )
    cfg = tmp / "asv.conf.json"
    cfg.write_text(json.dumps(conf))
    env = dict(os.environ, HOME=str(tmp), DSBENCH_ASV_SUITE="smoke")
    subprocess.run(
        [ASV, "machine", "--yes", "--machine", "testbox", "--config", str(cfg)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    return cfg, env, tmp


def _asv(args, asv_setup):
    cfg, env, _ = asv_setup
    return subprocess.run(
        [ASV, *args, "--config", str(cfg)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,  # under make test's per-test limit, so its output is shown
    )


@pytest.fixture(scope="module")
def asv_run(asv_setup):
    """One real asv run of AdamW (smoke size) in 2 rounds: dsbench's measurement and asv's own
    timing (one repeat of one call a round)."""
    proc = _asv(
        [
            "run",
            "--python=same",
            "--attribute",
            "rounds=2",
            "--record-samples",
            "--set-commit-hash",
            _head(),
            "--machine",
            "testbox",
            "--show-stderr",
            "-b",
            r"Adamw\.(track_bandwidth|time_call)",
            "-a",
            "repeat=1",
            "-a",
            "number=1",
        ],
        asv_setup,
    )
    out = proc.stdout + proc.stderr
    # the run discovers every benchmark first (benchmarks.json, checked below), as `asv check`
    assert proc.returncode == 0 and "Traceback" not in out, out
    _, _, tmp = asv_setup
    return tmp / "results"


def test_asv_rounds_record_a_sample_each(asv_run):
    files = [p for p in (asv_run / "asv" / "testbox").glob("*.json") if p.name != "machine.json"]
    assert len(files) == 1
    doc = json.loads(files[0].read_text())
    result = dict(zip(doc["result_columns"], doc["results"]["bench_kernels.Adamw.track_bandwidth"],
                      strict=False))  # fmt: skip
    (value,) = result["result"]  # one parameter combination in the smoke suite
    assert value > 0  # GB/s, measured by dsbench's timing core
    (samples,) = result["samples"]  # a value a round (each a fresh process), not the last alone
    assert len(samples) == 2 and value == pytest.approx(np.median(samples))
    benchmarks = json.loads((asv_run / "asv" / "benchmarks.json").read_text())
    assert benchmarks["bench_kernels.Adamw.track_bandwidth"]["unit"] == "GB/s"
    assert benchmarks["bench_kernels.Adamw.time_call"]["unit"] == "seconds"


def test_every_definition_is_an_asv_benchmark_with_its_unit(asv_run):
    """Discovery (the run's benchmarks.json): a class per dsbench definition, track_ of its
    primary metric with that unit, asv's time_/peakmem_ for single-process ones."""
    from dsbench.suites import BENCHMARKS

    discovered = json.loads((asv_run / "asv" / "benchmarks.json").read_text())
    by_class = {}
    for name, meta in discovered.items():
        if isinstance(meta, dict):
            _, cls, method = name.split(".")
            by_class.setdefault(cls, {})[method] = meta
    assert len(by_class) == len(BENCHMARKS)
    for bench in BENCHMARKS.values():
        methods = by_class[bench.name.title().replace("_", "")]
        track = methods[f"track_{bench.primary.name}"]
        assert track["unit"] == bench.primary.unit
        assert track["param_names"] == list(bench.grid("smoke", _cpu_context()))
        if bench.ranks_param:
            assert set(methods) == {f"track_{bench.primary.name}"}
        else:
            assert methods["time_call"]["unit"] == "seconds"
            assert methods["peakmem_call"]["unit"] == "bytes"
    units = {m["unit"] for m in discovered.values() if isinstance(m, dict)}
    assert {"samples/s", "ms/token", "GB/s", "TFLOP/s", "bytes"} <= units


def _cpu_context():
    from dsbench.suites import Context

    return Context(device="cpu", backend="cpu", suite="smoke")


def test_dsbench_compare_reads_the_asv_run_next_to_its_own(asv_run, capsys):
    """asv's track_ of the primary metric has the id of the `dsbench run` row: they pair."""
    from dsbench.cli import main

    argv = ["run", "--suite", "smoke", "--filter", "^adamw", "--out", str(asv_run),
            "--no-progress", "--no-compare"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    argv = ["compare", "--results", str(asv_run), "--baseline", "suite=asv", "--contender",
            "suite=smoke", "--format", "plain", "--factor", "100"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"baseline: run asv-{_head()[:8]}-existing" in out
    row = next(line for line in out.splitlines() if line.startswith("adamw[impl=torch"))
    cells = row.split()
    assert cells[:3] == ["adamw[impl=torch,params=100000]", "GB/s", "↑"]
    baseline, contender, ratio = (float(c) for c in cells[3:6])
    assert (
        baseline > 0
        and contender > 0
        # asv's value is the median of its 2 rounds, compare's centre their geometric mean
        and ratio == pytest.approx(contender / baseline, rel=3e-2, abs=1e-3)
    )
    # each side's environment: asv records no versions for an existing environment
    assert "asv: (versions not recorded)" in row and "python 3.11" in row
    assert "adamw.time_call[impl=torch,params=100000]" in out  # asv-only: one side
    assert "only in baseline" in out
