import json
import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
FIXTURE_RESULTS = Path(__file__).resolve().parent / "fixtures" / "results"
"""The results tests read: a small copy of reference runs (tests/fixtures/README.md), so that
committing a result to ``results/`` never changes a test. Read it; never write into it."""
SHIPPED_CLAIMS = REPO / "results" / "claims"
"""The claim definitions dsbench ships (published tables to check, not results): tests read
these, and put them beside the fixture runs where a test needs a results folder with claims."""


@pytest.fixture(autouse=True)
def _seed_and_isolate(monkeypatch, tmp_path_factory):
    """Seed every RNG, and keep caches and results out of the user's folders."""
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    monkeypatch.setenv("DSBENCH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("DSBENCH_MACHINE", "testbox")
    # one terminal width however pytest runs (xdist's workers get COLUMNS=80, a plain run none:
    # 100); the tests of fitting a width set their own (tests/test_terminal_width.py)
    monkeypatch.setenv("COLUMNS", "100")


def make_row(bid: str, samples, *, unit="GB/s", direction="higher", status="ok", one_launch=False):
    """A result row as dsbench writes it, from given metric samples: a flat list (one launch)
    or a list of lists, one per launch (the value is then the geometric mean of their
    medians, as ``dsbench ab`` writes it), or with ``one_launch`` one per round of a single
    launch (the training suite's alternating rounds)."""
    from dsbench.stats import centre, summarize

    nested = bool(samples) and all(isinstance(x, list | tuple) for x in samples)
    rounds = [list(r) for r in samples] if nested else [list(samples)]
    samples = [x for r in rounds for x in r]

    name = bid.split("[")[0]
    row = {
        "id": bid,
        "name": name,
        "params": {},
        "status": status,
        "metric": "m",
        "unit": unit,
        "direction": direction,
    }
    if status == "ok":
        s = summarize(samples)
        row.update(
            value=centre(rounds) if nested and not one_launch else s.median,
            samples=list(samples),
            rounds=[{"launch": 0 if one_launch else i, "n": len(r)} for i, r in enumerate(rounds)],
            stats=s.to_dict(),
        )
    else:
        row["error" if status == "failed" else "reason"] = "boom"
    return row


def make_doc(run_id: str, created: str, rows, *, label=None, env=None, machine="testbox"):
    from dsbench import results

    env = env or {}
    base_env = {
        "python": {"version": "3.11.7"},
        "packages": {"torch": "2.13.0+cpu"},
        "backend": "cpu",
        "dsbench": {"version": "0.1.0", "commit": "abcdef123456"},
    }
    base_env.update(env)
    return {
        "schema": results.SCHEMA,
        "schema_version": results.SCHEMA_VERSION,
        "source": "dsbench",
        "run_id": run_id,
        "created": created,
        "machine": machine,
        "label": label,
        "suite": "quick",
        "env": base_env,
        "profile": {"name": "cpu"},
        "benchmarks": rows,
    }


def write_json(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def fixture_results(dest: Path) -> Path:
    """A results folder at ``dest`` as ``dsbench publish`` finds one: the fixture runs
    (:data:`FIXTURE_RESULTS`) and the shipped claims (:data:`SHIPPED_CLAIMS`)."""
    shutil.copytree(FIXTURE_RESULTS, dest)
    shutil.copytree(SHIPPED_CLAIMS, dest / "claims")
    return dest


@dataclass(frozen=True)
class PublishedSite:
    results: Path
    out: Path
    summary: str
    """What ``dsbench publish`` printed: ``wrote <out>/ (N runs, N pages, N charts); ...``."""
    imported: frozenset[str]
    """Every module the publishing process imported (``python -X importtime``)."""


@pytest.fixture(scope="session")
def fixture_site(tmp_path_factory) -> PublishedSite:
    """The fixture runs and the shipped claims, published once per session by
    ``python -X importtime -m dsbench publish`` in a fresh process: the site the publish tests
    check, and what a real publish imports: every test that uses it is in tests/test_publish.py,
    so that xdist (each file on one worker) publishes it once."""
    tmp = tmp_path_factory.mktemp("fixture-site")
    res = fixture_results(tmp / "results")
    out = tmp / "site"
    env = dict(os.environ, DSBENCH_CACHE_DIR=str(tmp / "cache"), DSBENCH_MACHINE="testbox")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dsbench", "publish", "--results", str(res),
         "--out", str(out)],
        capture_output=True, text=True, timeout=600, cwd=REPO, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "dsbench: warning" not in proc.stderr, proc.stderr[-2000:]  # every file is read
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    return PublishedSite(res, out, proc.stdout, frozenset(imported))
