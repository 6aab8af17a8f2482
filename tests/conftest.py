import json
import random

import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def _seed_and_isolate(monkeypatch, tmp_path_factory):
    """Seed every RNG, and keep caches and results out of the user's folders."""
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    monkeypatch.setenv("DSBENCH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("DSBENCH_MACHINE", "testbox")


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
