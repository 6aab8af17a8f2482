"""Result files: schema round trip, migration, atomic never-overwriting writes, tolerant loading."""

import hashlib
import json

import pytest

from dsbench import results
from dsbench.errors import UsageError
from tests.conftest import make_doc, make_row, write_json


def _doc(run_id="20261130T000000Z-aaaaaa", created="2026-11-30T00:00:00+00:00", label=None):
    return make_doc(run_id, created, [make_row("adamw[params=1]", [1.0, 2.0, 3.0])], label=label)


def test_round_trip(tmp_path):
    doc = _doc(label="base line")
    path = results.write_run(doc, root=tmp_path)
    assert path == tmp_path / "testbox" / "20261130T000000Z-aaaaaa-base-line.json"
    run = results.read_run(path)
    assert run.doc == doc
    assert (run.id, run.label, run.machine) == (doc["run_id"], "base line", "testbox")
    assert run.benchmarks["adamw[params=1]"]["samples"] == [1.0, 2.0, 3.0]
    assert not list(path.parent.glob(".tmp-*")), "temporary file left behind"


def test_never_overwrites(tmp_path):
    doc = _doc()
    path = results.write_run(doc, root=tmp_path)
    before = path.read_bytes()
    with pytest.raises(UsageError, match="already exists"):
        results.write_run(doc, root=tmp_path)
    with pytest.raises(UsageError, match="already exists"):
        results.write_run(doc, path=path)
    assert path.read_bytes() == before


def test_invalid_doc_is_refused_before_writing(tmp_path):
    doc = _doc()
    doc["benchmarks"][0]["status"] = "great"
    with pytest.raises(results.ResultFileError, match=r"status 'great' is not one of ok, failed"):
        results.write_run(doc, root=tmp_path)
    assert not any(tmp_path.rglob("*.json"))


def test_migration_from_an_older_schema(tmp_path, monkeypatch):
    # Pretend the current schema is 2 and that version 2 renamed 'machine' from 'host'.
    def v1_to_v2(doc):
        doc["machine"] = doc.pop("host")
        return doc

    old = _doc()
    old["host"] = old.pop("machine")
    path = write_json(tmp_path / "old.json", old)
    raw = path.read_bytes()
    monkeypatch.setattr(results, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(results.MIGRATIONS, 1, v1_to_v2)
    run = results.read_run(path)
    assert run.migrated_from == 1
    assert run.doc["schema_version"] == 2 and run.machine == "testbox"
    assert path.read_bytes() == raw, "reading must not modify the file"


def test_newer_schema_and_missing_migration_are_named(tmp_path, monkeypatch):
    newer = _doc()
    newer["schema_version"] = results.SCHEMA_VERSION + 1
    p = write_json(tmp_path / "newer.json", newer)
    with pytest.raises(results.ResultFileError, match=r"newer.json: schema version .* is newer"):
        results.read_run(p)
    old = write_json(tmp_path / "old.json", _doc())  # version 1
    monkeypatch.setattr(results, "SCHEMA_VERSION", 3)
    with pytest.raises(results.ResultFileError, match="no migration from schema version 1"):
        results.read_run(old)


def test_loader_skips_bad_files_with_one_line_each(tmp_path):
    good1 = results.write_run(
        _doc("20261130T000001Z-aaaaaa", "2026-11-30T00:00:01+00:00"), root=tmp_path
    )
    good2 = results.write_run(
        _doc("20261130T000000Z-bbbbbb", "2026-11-30T00:00:00+00:00"), root=tmp_path
    )
    m = tmp_path / "testbox"
    (m / "corrupt.json").write_text('{"schema": "dsbench-result", "run_id": ')
    write_json(m / "foreign.json", {"hello": "world"})
    write_json(m / "list.json", [1, 2, 3])
    bad_field = _doc("20261130T000002Z-cccccc")
    del bad_field["env"]
    write_json(m / "nofield.json", bad_field)
    write_json(m / "machine.json", {"machine": "x", "version": 1})  # asv's: not ours, no warning
    write_json(tmp_path / "asv" / "x" / "abc-py.json", {"results": {}})
    hashes = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.rglob("*.json")}

    warnings: list[str] = []
    runs = results.load_runs(tmp_path, warn=warnings.append)

    assert [r.path for r in runs] == [good2, good1]  # oldest first
    assert len(warnings) == 4
    assert all("\n" not in w for w in warnings)
    text = "\n".join(warnings)
    for name, why in [
        ("corrupt.json", "corrupt JSON"),
        ("foreign.json", "not a dsbench result"),
        ("list.json", "not a dsbench result"),
        ("nofield.json", "missing field 'env'"),
    ]:
        assert any(name in w and why in w for w in warnings), (name, text)
    assert hashes == {
        p: hashlib.sha256(p.read_bytes()).hexdigest() for p in tmp_path.rglob("*.json")
    }


def test_json_written_is_strict(tmp_path):
    doc = _doc()
    doc["benchmarks"][0]["value"] = float("nan")
    with pytest.raises(ValueError):
        results.write_run(doc, root=tmp_path)
    assert (
        json.loads(results.write_run(_doc(), root=tmp_path).read_text())["schema"]
        == "dsbench-result"
    )
