"""Typed result records (dsbench.records): every fixture result file (tests/fixtures/results,
copies of reference runs), each of its rows, and every claim check, survives ``from_json`` ->
``to_json`` unchanged, key order included. That every file committed to results/ does is
checked in tests/test_results.py."""

from __future__ import annotations

import ast
import dataclasses
import json
import pickle
from pathlib import Path

import pytest

from dsbench import records, results
from dsbench.records import UNSET, ClaimCheck, MetricValue, Peak, RecordError, Round, Row
from tests.conftest import FIXTURE_RESULTS, SHIPPED_CLAIMS

RunRecord = records.RunRecord


def fixture_docs() -> list[tuple[str, dict]]:
    paths = sorted(FIXTURE_RESULTS.rglob("*.json"))
    return [(p.name, json.loads(p.read_text())) for p in paths
            if not results.is_foreign_file(p, FIXTURE_RESULTS)]  # fmt: skip


def fixture_rows() -> list[tuple[str, dict]]:
    return [(f"{name}[{i}]", row) for name, doc in fixture_docs()
            for i, row in enumerate(doc["benchmarks"])]  # fmt: skip


def test_every_fixture_run_round_trips():
    docs = fixture_docs()
    assert len(docs) == 13  # the quick, training, soak and ab runs of tests/fixtures/results
    assert {d.get("suite") for _, d in docs} == {"quick", "training", "soak"}
    for where, raw in docs:
        run = RunRecord.from_json(raw)
        out = run.to_json()
        assert out == raw, where
        assert json.dumps(out) == json.dumps(raw), where  # key order too
        assert not run.extra, where  # every header field is declared
        assert isinstance(run.rows, tuple) and all(isinstance(r, Row) for r in run.rows)
        assert [r.to_json() for r in run.rows] == raw["benchmarks"]


def test_every_fixture_row_round_trips():
    rows = fixture_rows()
    assert len(rows) == 117
    for where, raw in rows:
        out = Row.from_json(raw).to_json()
        assert out == raw, where
        assert json.dumps(out) == json.dumps(raw), where  # key order too


def test_rows_read_typed():
    (_, raw), *_ = [r for r in fixture_rows() if "metrics" in r[1]]
    row = Row.from_json(raw)
    assert row.ok and row.direction in records.DIRECTIONS
    assert all(isinstance(r, Round) for r in row.rounds)
    assert all(isinstance(m, MetricValue) for m in row.metrics.values())
    assert row.peak is None or isinstance(row.peak, Peak)
    assert row.round_samples() == results.row_rounds(raw)
    assert row.error is UNSET and not row.error and row.message == ""


def test_built_row_is_in_declaration_order_and_absent_fields_stay_absent():
    row = Row(id="x[a=1]", name="x", params={"a": 1}, status="failed", error="boom",
              metric="time", unit="ms", direction=records.LOWER)  # fmt: skip
    assert list(row.to_json()) == ["id", "name", "params", "status", "error", "metric", "unit",
                                   "direction"]  # fmt: skip
    assert row.message == "boom"
    with_none = dataclasses.replace(row, pct_of_peak=None)
    assert with_none.to_json()["pct_of_peak"] is None  # null stays apart from absent
    assert Row.from_json(with_none.to_json()) == with_none


def test_unknown_fields_are_kept():
    raw = {"id": "a", "name": "a", "params": {}, "status": "skipped", "reason": "no GPU",
           "new_field": [1, 2], "direction": "sideways"}  # fmt: skip
    row = Row.from_json(raw)
    assert row.extra == {"new_field": [1, 2]} and row.get("new_field") == [1, 2]
    assert row.get("reason") == "no GPU" and row.get("value", 0) == 0
    assert row.to_json() == raw and list(row.to_json()) == list(raw)


@pytest.mark.parametrize(
    "change, why",
    [
        ({"id": 3}, "field 'id' missing or not str"),
        ({"status": "great"}, "status 'great' is not one of ok, failed, skipped, interrupted"),
        ({"value": float("inf")}, "'value' is missing or not a finite number"),
        ({"direction": "up"}, "direction 'up' is not one of higher, lower"),
        ({"rounds": [{"launch": 0, "n": 2}]}, "'rounds' counts 2 samples but 'samples' has 1"),
        ({"peak": 3}, "field 'peak' is not an object"),
    ],
)
def test_bad_rows_name_the_field(change, why):
    raw = {"id": "a", "name": "a", "params": {}, "status": "ok", "metric": "time", "unit": "ms",
           "direction": "lower", "value": 1.0, "samples": [1.0],
           "stats": dict.fromkeys(records.SUMMARY_FIELDS, 1.0)}  # fmt: skip
    Row.from_json(raw)
    with pytest.raises(RecordError, match=why.replace("(", r"\(")):
        Row.from_json(raw | change)


def test_built_run_is_in_declaration_order_and_checks_name_the_field():
    row = Row(id="a", name="a", params={}, status="skipped", reason="no GPU")
    run = RunRecord(schema="dsbench-result", schema_version=3, source="dsbench", run_id="r",
                    created="2026-12-01T00:00:00+00:00", machine="m", label=None, env={},
                    benchmarks=(row,), purpose="noise")  # fmt: skip
    doc = run.to_json()
    assert list(doc) == ["schema", "schema_version", "source", "run_id", "created", "machine",
                         "label", "env", "benchmarks", "purpose"]  # fmt: skip
    assert doc["benchmarks"] == [row.to_json()] and doc["label"] is None
    back = RunRecord.from_json(doc)
    assert back == run and back.rows == (row,) and back.suite is UNSET and not back.extra
    for change, why in [
        ({"machine": None}, "field 'machine' should be str, got NoneType"),
        ({"suite": 3}, "field 'suite' should be str, got int"),
        ({"source": "excel"}, "source 'excel' is not one of dsbench, asv"),
        ({"interrupted": "yes"}, "'interrupted' is not {signal, finished}"),
        ({"benchmarks": [row.to_json(), {"id": 1}]}, "benchmarks[1] field 'id' missing or not str"),
    ]:
        with pytest.raises(RecordError) as exc:
            RunRecord.from_json(doc | change)
        assert str(exc.value) == why
    with pytest.raises(RecordError, match="missing field 'env'"):
        RunRecord.from_json({k: v for k, v in doc.items() if k != "env"})


def test_summary_fields_match_stats():
    from dsbench.stats import Summary

    assert tuple(Summary.__dataclass_fields__) == records.SUMMARY_FIELDS
    assert records.STATUSES == results.STATUSES and records.SOURCES == results.SOURCES


def test_unset_is_one_falsy_value_across_processes():
    assert pickle.loads(pickle.dumps(UNSET)) is UNSET is records.Unset()
    assert not UNSET and repr(UNSET) == "UNSET"
    row = Row(id="a", name="a", params={}, status="ok", value=1.0)
    assert pickle.loads(pickle.dumps(row)) == row


def test_claim_checks_round_trip():
    from dsbench.publish.data import claims
    from dsbench.results.asv import load_all_runs

    found = claims.check(claims.load_claims(SHIPPED_CLAIMS), load_all_runs(FIXTURE_RESULTS))
    assert found
    for found_check in found:
        assert isinstance(found_check, ClaimCheck)
        entry = found_check.to_json()  # fields in declaration order, every one set
        assert list(entry) == list(ClaimCheck.json_fields())
        check = ClaimCheck.from_json(entry)
        assert check == found_check
        assert check.claim == entry["claim"] and check.decision == entry["decision"]
        out = check.to_json()
        assert out == entry and list(out) == list(entry)
        assert not check.extra  # every field check() writes is declared


def test_records_import_nothing_from_dsbench():
    """The package imports its own modules (relatively) and nothing else of dsbench or torch;
    no module of it exceeds 600 lines."""
    package = Path(records.__file__).parent
    for path in sorted(package.glob("*.py")):
        text = path.read_text()
        assert len(text.splitlines()) <= 600, path
        tree = ast.parse(text)
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module or "" for n in ast.walk(tree)
                     if isinstance(n, ast.ImportFrom) and not n.level}  # fmt: skip
        assert not {m for m in imported if m.split(".")[0] in ("dsbench", "torch")}, path


def test_nested_data_reads_typed():
    """What code reads of a row and a run is typed: statistics, work, memory, notes, timing,
    launches, the A/B block; unknown keys stay in ``extra``."""
    runs = [RunRecord.from_json(raw) for _, raw in fixture_docs()]
    rows = [r for run in runs for r in run.rows if r.ok]
    assert all(isinstance(r.stats, records.Stats) and r.stats.n >= 1 for r in rows)
    measured = [r for r in rows if r.timing]
    assert measured and all(isinstance(r.timing.summary, records.Stats) for r in measured)
    assert all(isinstance(r.work, records.CountedWork) for r in measured)
    assert all(isinstance(r.memory, records.Memory) for r in measured if r.memory)
    fresh = [r.memory.fresh_process for r in measured if r.memory and r.memory.fresh_process]
    assert fresh and all(isinstance(m, records.Memory) for m in fresh)
    phases = [r.notes.phases_ms for r in measured if r.notes and r.notes.phases_ms]
    assert phases and all(isinstance(p, records.Phases) and p.forward > 0 for p in phases)
    assert any(r.notes.extra for r in measured)  # each benchmark's own notes
    assert all(isinstance(x, records.LaunchInfo) for run in runs for x in run.launches or [])
    pairs = [run.ab for run in runs if run.ab]
    assert pairs and all(isinstance(ab, records.ABBlock) and ab.side for ab in pairs)


def test_memory_record_keeps_its_key_order():
    raw = {"host_peak_rss_bytes": 3, "host_peak_reset": True, "host_rss_start_bytes": 1}
    built = dataclasses.replace(records.Memory.from_json(raw),
                                fresh_process=records.Memory(host_peak_rss_bytes=2))  # fmt: skip
    assert list(built.to_json()) == [*raw, "fresh_process"]
    assert records.Memory.from_json(built.to_json()) == built


def test_ordered_records_keep_the_keywords_order():
    row = Row.ordered(id="a", name="a", params={}, metric="m", unit="u", direction="lower",
                      status="skipped", reason="why", attempted=3)  # fmt: skip
    assert list(row.to_json()) == ["id", "name", "params", "metric", "unit", "direction",
                                   "status", "reason", "attempted"]  # fmt: skip
    assert row.extra == {"attempted": 3} and Row.from_json(row.to_json()) == row
