"""Result files: schema round trip, migration, atomic never-overwriting writes, tolerant loading."""

import hashlib
import json
import re
from pathlib import Path

import pytest

from dsbench import records, results
from dsbench.errors import UsageError
from tests.conftest import FIXTURE_RESULTS, REPO, make_doc, make_row, write_json


def _doc(run_id="20261130T000000Z-aaaaaa", created="2026-11-30T00:00:00+00:00", label=None):
    return make_doc(run_id, created, [make_row("adamw[params=1]", [1.0, 2.0, 3.0])], label=label)


def test_round_trip(tmp_path):
    doc = _doc(label="base line")
    path = results.write_run(doc, root=tmp_path)
    assert path == tmp_path / "testbox" / "20261130T000000Z-aaaaaa-base-line.json"
    run = results.read_run(path)
    assert run.record.to_json() == doc
    assert run.record.to_json() == doc and list(run.record.to_json()) == list(doc)
    assert run.rows == {r.id: r for r in run.record.rows} and run.record.label == "base line"
    assert (run.id, run.label, run.machine) == (doc["run_id"], "base line", "testbox")
    assert run.rows["adamw[params=1]"].samples == [1.0, 2.0, 3.0]
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


def test_migration_chain_to_a_future_schema(tmp_path, monkeypatch):
    # Pretend the current schema is 4 and that version 4 renamed 'machine' from 'host'; a
    # version-1 file goes through the real 1 -> 2 -> 3 steps, then this one.
    def v3_to_v4(doc):
        doc["machine"] = doc.pop("host")
        return doc

    old = _doc()
    old["host"] = old.pop("machine")
    del old["source"]
    old["schema_version"] = 1
    path = write_json(tmp_path / "old.json", old)
    raw = path.read_bytes()
    monkeypatch.setattr(results, "SCHEMA_VERSION", 4)
    monkeypatch.setitem(results.MIGRATIONS, 3, v3_to_v4)
    run = results.read_run(path)
    assert run.migrated_from == 1
    assert (
        run.record.to_json()["schema_version"] == 4
        and run.machine == "testbox"
        and run.source == "dsbench"
    )
    assert path.read_bytes() == raw, "reading must not modify the file"


def test_newer_schema_and_missing_migration_are_named(tmp_path, monkeypatch):
    newer = _doc()
    newer["schema_version"] = results.SCHEMA_VERSION + 1
    p = write_json(tmp_path / "newer.json", newer)
    with pytest.raises(results.ResultFileError, match=r"newer.json: schema version .* is newer"):
        results.read_run(p)
    old = write_json(tmp_path / "old.json", _doc())  # the current version, 3
    monkeypatch.setattr(results, "SCHEMA_VERSION", 5)
    with pytest.raises(results.ResultFileError, match="no migration from schema version 3"):
        results.read_run(old)


def _v1(doc: dict) -> dict:
    """``doc`` as a schema-1 file had it: no ``source``."""
    doc = dict(doc, schema_version=1)
    del doc["source"]
    return doc


def test_v1_files_load_as_current_with_source_dsbench(tmp_path):
    path = write_json(tmp_path / "m" / "v1.json", _v1(_doc()))
    raw = path.read_bytes()
    run = results.read_run(path)
    assert run.migrated_from == 1
    assert run.record.to_json()["schema_version"] == results.SCHEMA_VERSION == 3
    assert run.source == run.record.to_json()["source"] == "dsbench"
    assert path.read_bytes() == raw, "reading must not modify the file"
    assert [r.source for r in results.load_runs(tmp_path, warn=pytest.fail)] == ["dsbench"]


def test_every_committed_result_file_reads_at_the_current_schema():
    """Every result file committed to results/ (the one test that reads that folder: others
    read tests/fixtures/results) validates, loads at the current schema without being changed,
    and its typed record gives back the same JSON, key order included, with every header field
    declared: committing a file that does not fails here."""
    root = REPO / "results"
    files = sorted(p for p in root.rglob("*.json") if not results.is_foreign_file(p, root))
    assert files, "no committed result files"
    raw = {p: p.read_bytes() for p in files}
    runs = results.load_runs(root, warn=pytest.fail)  # none skipped
    assert sorted(r.path for r in runs) == files
    for run in runs:
        assert run.source == "dsbench" and run.record.schema_version == results.SCHEMA_VERSION
        assert results.run_text(run.record) == raw[run.path].decode(), run.path  # byte for byte
        assert not run.record.extra, run.path  # every header field is declared
    assert raw == {p: p.read_bytes() for p in files}


def test_every_committed_result_file_has_its_purpose_in_the_manifest():
    """results/ keeps reference runs only, each listed with a one-line purpose in
    results/manifest.toml (what the pages show), and the manifest lists nothing else; a soak's
    stream (*.soak.jsonl) belongs to the result file of the same name."""
    from dsbench.publish.data import manifest

    root = REPO / "results"
    files = {p.relative_to(root).as_posix() for p in root.rglob("*.json")
             if not results.is_foreign_file(p, root)}  # fmt: skip
    purposes = manifest.load(root, warn=pytest.fail)
    assert set(purposes) == files, "results/manifest.toml and the result files differ"
    for stream in root.rglob("*.soak.jsonl"):
        assert stream.with_name(stream.name.replace(".soak.jsonl", ".json")).is_file(), stream


def test_new_runs_are_written_as_v3_with_their_source(tmp_path):
    path = results.write_run(_doc(), root=tmp_path)
    on_disk = json.loads(path.read_text())
    assert (on_disk["schema_version"], on_disk["source"]) == (3, "dsbench")
    assert results.read_run(path).migrated_from is None


def test_runner_writes_the_current_schema_and_source():
    from datetime import UTC, datetime

    from dsbench import hardware

    record = results.new_run_doc(
        suite="smoke",
        label=None,
        env={},
        profile=hardware.get_profile("h100-sxm"),
        rows=[],
        started=datetime.now(UTC),
        argv=[],
    )
    assert isinstance(record, records.RunRecord)  # typed up to the writer
    doc = record.to_json()
    assert (doc["schema_version"], doc["source"]) == (results.SCHEMA_VERSION, "dsbench")
    assert list(doc) == ["schema", "schema_version", "source", "run_id", "created", "finished",
                         "wall_s", "machine", "label", "suite", "argv", "env", "profile",
                         "launches", "benchmarks"]  # fmt: skip
    assert results.validate(doc, "<new run>").to_json() == doc


@pytest.mark.parametrize(
    ("source", "why"),
    [("excel", "source 'excel' is not one of dsbench, asv"), (None, "field 'source' should be")],
)
def test_v2_source_is_checked(tmp_path, source, why):
    doc = _doc()
    doc["source"] = source
    with pytest.raises(results.ResultFileError, match=why):
        results.read_run(write_json(tmp_path / "bad.json", doc))
    del doc["source"]  # a version-2 file must carry it; only version 1 is given a default
    with pytest.raises(results.ResultFileError, match="missing field 'source'"):
        results.read_run(write_json(tmp_path / "none.json", doc))


def test_asv_publish_output_is_not_read_as_results(tmp_path):
    write_json(tmp_path / "asv-html" / "graphs" / "summary" / "x.json", {"a": 1})
    write_json(tmp_path / "asv-html" / "index.json", {"benchmarks": {}})
    results.write_run(_doc(), root=tmp_path)
    warnings: list[str] = []
    assert len(results.load_runs(tmp_path, warn=warnings.append)) == 1
    assert warnings == []


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
    doc["benchmarks"][0]["value"] = float("nan")  # refused by validation, naming the field
    with pytest.raises(results.ResultFileError, match="'value' is missing or not a finite"):
        results.write_run(doc, root=tmp_path)
    doc = _doc()
    doc["benchmarks"][0]["memory"] = {"peak": float("nan")}  # refused by the strict encoder
    with pytest.raises(ValueError):
        results.write_run(doc, root=tmp_path)
    assert not any(tmp_path.rglob("*.json"))
    assert (
        json.loads(results.write_run(_doc(), root=tmp_path).read_text())["schema"]
        == "dsbench-result"
    )


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda r: r.pop("value"), "is ok but 'value' is missing or not a finite number"),
        (lambda r: r.update(value="12"), "is ok but 'value' is missing or not a finite number"),
        (lambda r: r.update(direction="up"), "direction 'up' is not one of higher, lower"),
        (lambda r: r.pop("stats"), "is ok but 'stats' is missing"),
        (lambda r: r["stats"].pop("ci_low"), "stats 'ci_low' missing or not a finite number"),
        (lambda r: r.update(samples=[1.0, "x"]), "'samples' is not a list of finite numbers"),
    ],
)
def test_ok_rows_carry_what_compare_and_publish_use(tmp_path, damage, why):
    """A file whose ok row lacks its numbers is named and skipped, like a corrupt one."""
    good = results.write_run(_doc("20261130T000001Z-aaaaaa"), root=tmp_path)
    doc = _doc("20261130T000002Z-bbbbbb")
    damage(doc["benchmarks"][0])
    write_json(tmp_path / "testbox" / "damaged.json", doc)
    warnings: list[str] = []
    assert [r.path for r in results.load_runs(tmp_path, warn=warnings.append)] == [good]
    assert len(warnings) == 1 and "damaged.json: benchmarks[0]" in warnings[0]
    assert why in warnings[0]
    # failed and skipped rows carry no numbers and need none
    doc = _doc("20261130T000003Z-cccccc")
    doc["benchmarks"][0] = {"id": "x", "name": "x", "params": {}, "status": "failed", "error": "e"}
    results.validate(doc, "<doc>")


def test_too_deeply_nested_file_is_named_and_skipped(tmp_path):
    good = results.write_run(_doc(), root=tmp_path)
    deep = tmp_path / "testbox" / "deep.json"
    deep.write_text('{"schema": "dsbench-result", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    warnings: list[str] = []
    assert [r.path for r in results.load_runs(tmp_path, warn=warnings.append)] == [good]
    assert warnings == [f"skipping {deep}: corrupt JSON (nested too deeply)"]


def _v2(doc: dict) -> dict:
    """``doc`` as a schema-2 file had it: no rounds."""
    doc = json.loads(json.dumps(doc), object_hook=dict)
    doc["schema_version"] = 2
    doc.pop("launches", None)
    for row in doc["benchmarks"]:
        row.pop("rounds", None)
    return doc


def test_v2_files_are_one_launch_of_one_round(tmp_path):
    path = write_json(tmp_path / "m" / "v2.json", _v2(_doc()))
    run = results.read_run(path)
    assert run.migrated_from == 2 and len(run.record.to_json()["launches"]) == 1
    for row in run.record.to_json()["benchmarks"]:
        if row.get("samples"):
            assert row["rounds"] == [{"launch": 0, "n": len(row["samples"])}]
            assert results.row_rounds(row) == [row["samples"]]


def test_rounds_split_samples_by_launch_or_by_round():
    row = make_row("x", [[1.0, 2.0], [3.0], [4.0, 5.0, 6.0]])
    assert results.row_rounds(row) == [[1.0, 2.0], [3.0], [4.0, 5.0, 6.0]]
    # two rounds inside launch 0 (alternating with another case), then launch 1
    row["rounds"] = [{"launch": 0, "n": 2}, {"launch": 0, "n": 1}, {"launch": 1, "n": 3}]
    assert results.row_rounds(row, "round") == [[1.0, 2.0], [3.0], [4.0, 5.0, 6.0]]
    assert results.row_rounds(row, "launch") == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert results.row_rounds({"value": 7.0}) == [[7.0]]  # one value (asv --quick)


@pytest.mark.parametrize(
    ("rounds", "why"),
    [
        ([{"launch": 0, "n": 2}], "'rounds' counts 2 samples but 'samples' has 6"),
        ([{"launch": -1, "n": 6}], "'rounds' is not a list of {launch, n} counts"),
        ([{"launch": 0}], "'rounds' is not a list of {launch, n} counts"),
    ],
)
def test_bad_rounds_are_named(tmp_path, rounds, why):
    doc = _doc()
    doc["benchmarks"] = [make_row("x", [[1.0, 2.0], [3.0], [4.0, 5.0, 6.0]])]
    doc["benchmarks"][0]["rounds"] = rounds
    with pytest.raises(results.ResultFileError, match=re.escape(why)):
        results.read_run(write_json(tmp_path / "bad.json", doc))


def _result_files() -> list[Path]:
    """Every dsbench result file under tests/fixtures/results and results/, globbed now."""
    out = []
    for root in (FIXTURE_RESULTS, REPO / "results"):
        out += sorted(p for p in root.rglob("*.json") if not results.is_foreign_file(p, root))
    return out


@pytest.mark.parametrize("path", _result_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_result_file_reads_typed_and_writes_back_byte_for_byte(path):
    """Item 5 of issue 26: a file at the current schema reads into the typed records and the
    writer gives back exactly its text (an older file: its migrated JSON, key order included)."""
    run = results.read_run(path)
    assert isinstance(run.record, records.RunRecord)
    assert all(isinstance(r, records.Row) for r in run.record.rows)
    text = path.read_text()
    if run.migrated_from is None:
        assert results.run_text(run.record) == text
    else:
        migrated = results.migrate(json.loads(text), str(path))
        assert json.dumps(run.record.to_json()) == json.dumps(migrated)


def test_result_files_to_check_byte_for_byte_exist():
    if not _result_files():
        pytest.skip("no result files under tests/fixtures/results or results/")
    assert all(p.suffix == ".json" for p in _result_files())
