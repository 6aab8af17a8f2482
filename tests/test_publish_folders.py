"""dsbench publish and its folders: a corrupt result file named on stderr, nothing to publish
(exit 2, nothing written), where the site may go and what replaces it, a failed build that
leaves the previous site, asv's runs and pages beside dsbench's, and the results folder's
manifest (each run's purpose)."""

import pytest

from dsbench import results
from dsbench.publish import site
from dsbench.publish.data import manifest
from dsbench.publish.pages import runs as run_pages
from tests.conftest import make_doc, make_row, write_json
from tests.test_publish import _one_run, _publish


def test_warning_names_the_corrupt_file_on_stderr(tmp_path, capsys):
    res = tmp_path / "results"
    results.write_run(
        make_doc(
            "20261130T000000Z-aaaaaa",
            "2026-11-30T00:00:00+00:00",
            [make_row("adamw[params=1]", [1.0, 2.0])],
        ),
        root=res,
    )
    (res / "testbox" / "broken.json").write_text("{")
    assert _publish(res, tmp_path / "site") == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "broken.json" in err[0] and "corrupt JSON" in err[0]


# ---------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("setup", ["empty", "missing", "only-corrupt"])
def test_nothing_to_publish_is_one_line_exit_2_nothing_written(tmp_path, capsys, setup):
    res = tmp_path / "results"
    if setup != "missing":
        res.mkdir()
    if setup == "only-corrupt":
        (res / "x.json").write_text("not json")
    out = tmp_path / "site"
    assert _publish(res, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("dsbench: error: nothing to publish")
    assert "dsbench run" in err[-1]
    assert len(err) == (2 if setup == "only-corrupt" else 1)  # the warning, then the error
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == (["results"] if setup != "missing" else [])


def test_out_must_be_new_empty_or_a_previous_site(tmp_path, capsys):
    res = tmp_path / "results"
    _one_run(res)
    foreign = tmp_path / "docs"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    assert _publish(res, foreign) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a dsbench site" in err[0]
    assert [p.name for p in foreign.iterdir()] == ["keep.txt"]
    assert _publish(res, res) == 2  # the results folder itself
    assert "overlap" in capsys.readouterr().err
    assert _publish(res, res / "site") == 2
    assert not (res / "site").exists()
    (tmp_path / "file").write_text("x")
    assert _publish(res, tmp_path / "file") == 2
    assert "not a folder" in capsys.readouterr().err

    empty = tmp_path / "empty"
    empty.mkdir()
    assert _publish(res, empty) == 0 and (empty / site.MARKER).is_file()
    (empty / "stale.html").write_text("old page")
    assert _publish(res, empty) == 0  # a previous site is replaced as a whole
    assert not (empty / "stale.html").exists() and (empty / "index.html").is_file()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".dsbench-site")]
    assert leftovers == []


def test_failed_build_leaves_the_previous_site(tmp_path, monkeypatch):
    res = tmp_path / "results"
    _one_run(res)
    out = tmp_path / "site"
    assert _publish(res, out) == 0
    before = (out / "index.html").read_text()

    def boom(site):
        raise RuntimeError("disk full")

    monkeypatch.setattr(run_pages, "history_page", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        _publish(res, out)
    assert (out / "index.html").read_text() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".dsbench")] == []


# ---------------------------------------------------------------------------- asv


def test_empty_asv_folder_publishes(tmp_path):
    res = tmp_path / "results"
    _one_run(res)
    (res / "asv").mkdir()
    out = tmp_path / "site"
    assert _publish(res, out) == 0
    assert "sources: dsbench" in (out / "index.html").read_text()


def test_asv_runs_and_asv_pages(tmp_path):
    from tests.test_asv_results import BENCHMARKS_JSON, COMMIT, T0, _asv_file

    res = tmp_path / "results"
    _one_run(res)
    write_json(res / "asv" / "benchmarks.json", BENCHMARKS_JSON)
    write_json(res / "asv" / "devbox" / "machine.json", {"machine": "devbox", "version": 1})
    for k, py in enumerate(("3.11", "3.12")):
        doc = _asv_file(
            py, "0.18.4", adamw=20.0 - 4 * k, decode=4.0, train=1000.0, started=T0 + k * 60_000
        )
        write_json(res / "asv" / "devbox" / f"{COMMIT[:8]}-{doc['env_name']}.json", doc)
    asv_html = res / "asv-html"
    asv_html.mkdir()
    (asv_html / "index.html").write_text("<html><body>asv</body></html>")
    write_json(asv_html / "graphs" / "summary.json", {"x": 1})  # not a dsbench result file
    (asv_html / "escape").symlink_to("/etc")
    out = tmp_path / "site"
    assert _publish(res, out) == 0
    index = (out / "index.html").read_text()
    assert 'href="asv/index.html"' in index and "sources: asv, dsbench" in index
    assert (out / "asv" / "index.html").is_file() and not (out / "asv" / "escape").exists()
    page = (out / "compare" / "python-3.11-vs-3.12.html").read_text()
    assert "asv suite (asv)" in page and "python 3.11" in page
    asv_run = next((out / "runs").glob("asv-*.html")).read_text()
    assert 'href="../asv/index.html"' in asv_run


# ---------------------------------------------------------------------------- the manifest


def _manifest(res, entries: str) -> None:
    text = f'schema = "{manifest.SCHEMA}"\nschema_version = {manifest.SCHEMA_VERSION}\n{entries}'
    (res / manifest.FILE).write_text(text, encoding="utf-8")


def test_manifest_purpose_on_the_run_page_and_the_index(tmp_path, capsys):
    res, out = tmp_path / "results", tmp_path / "site"
    doc = make_doc("20261130T000000Z-aaaaaa", "2026-11-30T00:00:00+00:00",
                   [make_row("adamw[params=1]", [1.0, 2.0, 3.0])])  # fmt: skip
    rel = results.write_run(doc, root=res).relative_to(res).as_posix()
    _manifest(res, f'[[runs]]\nfile = "{rel}"\npurpose = "the <b>reference</b> run"\n'
                   '[[runs]]\nfile = "testbox/gone.json"\npurpose = "removed since"\n'
                   '[[runs]]\nfile = "../outside.json"\npurpose = "not inside"\n')  # fmt: skip
    assert _publish(res, out) == 0
    err = capsys.readouterr().err
    assert "entry 3 left out" in err and "../outside.json" in err
    assert "lists testbox/gone.json, which is not a run read there" in err
    shown = "the &lt;b&gt;reference&lt;/b&gt; run"  # escaped like every string from the folder
    assert shown in (out / "index.html").read_text()
    (page,) = (out / "runs").glob("*.html")
    assert "purpose (manifest)" in page.read_text() and shown in page.read_text()


@pytest.mark.parametrize(
    "text, warned",
    [
        (None, None),  # no manifest: no purposes, no warning
        ("schema = [", "not read"),
        ('schema = "other"\nschema_version = 1\n', "not a dsbench-manifest file"),
        ('schema = "dsbench-manifest"\nschema_version = 1\nruns = 3\n', "not a list"),
    ],
)
def test_a_missing_or_malformed_manifest_publishes_without_purposes(tmp_path, text, warned):
    if text is not None:
        (tmp_path / manifest.FILE).write_text(text, encoding="utf-8")
    warnings: list[str] = []
    assert manifest.load(tmp_path, warnings.append) == {}
    assert len(warnings) == (warned is not None) and all(warned in w for w in warnings)


def test_manifest_entries_left_out_one_by_one(tmp_path):
    _manifest(tmp_path, '[[runs]]\nfile = "m/a.json"\npurpose = " one line "\n'
                        '[[runs]]\nfile = "m/a.json"\npurpose = "again"\n'
                        '[[runs]]\nfile = "m/b.json"\npurpose = """two\nlines"""\n'
                        '[[runs]]\nfile = "m/c.json"\n'
                        '[[runs]]\npurpose = "no file"\n')  # fmt: skip
    warnings: list[str] = []
    assert manifest.load(tmp_path, warnings.append) == {"m/a.json": "one line"}
    assert [w.split("left out: ")[1] for w in warnings] == [
        "m/a.json: listed twice",
        "m/b.json: the purpose is not one line",
        "m/c.json: no 'purpose' string",
        "no 'file' string",
    ]
