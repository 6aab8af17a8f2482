"""dsbench publish: a static site from the committed results and from synthetic ones (hostile
strings, an old schema, a corrupt file, asv runs, an empty folder), checked file by file and, in
headless Chromium, as a browser shows it."""

import html
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dsbench import asv_results, compare, results
from dsbench.cli import main
from dsbench.publish import comparisons, site
from dsbench.publish import runs as run_pages
from tests._soak_files import soak_results, write_soak
from tests.conftest import make_doc, make_row, write_json

REPO = Path(__file__).resolve().parents[1]
HOSTILE = "<script>alert(1)</script>"
LINK = re.compile(r'\b(?:href|src)="([^"]*)"')


def _publish(results_dir, out, capsys=None) -> int:
    return main(["publish", "--results", str(results_dir), "--out", str(out)])


def _pages(out: Path) -> list[Path]:
    """The site's own pages (asv's copied pages are asv's)."""
    return [p for p in out.rglob("*.html") if p.relative_to(out).parts[0] != "asv"]


def _check_links_and_images(out: Path) -> None:
    """Every href/src is relative and resolves to a file of the site; images are real PNGs."""
    for page in _pages(out):
        text = page.read_text()
        for target in LINK.findall(text):
            target = html.unescape(target)
            assert not re.match(r"^[a-z]+:", target), f"{page}: non-local link {target}"
            assert not target.startswith("/"), f"{page}: absolute link {target}"
            resolved = (page.parent / target.split("#")[0]).resolve()
            assert resolved.is_file(), f"{page}: broken link {target}"
            assert out.resolve() in resolved.parents, f"{page}: link leaves the site: {target}"
            if target.endswith(".png"):
                assert resolved.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", resolved
        assert "<script" not in text.lower(), f"{page}: a script element"


@pytest.fixture(scope="module")
def committed_site(tmp_path_factory):
    """The site of the reference runs committed in results/ (dsbench's, schema 1 files, and
    asv's when committed); asv's own pages (git-ignored) are left out."""
    tmp = tmp_path_factory.mktemp("committed")
    res = tmp / "results"
    shutil.copytree(REPO / "results", res, ignore=shutil.ignore_patterns("asv-html"))
    out = tmp / "site"
    assert _publish(res, out) == 0
    return res, out


def _section(page: str, heading: str) -> str:
    """The part of a comparison page under ``<h2>heading</h2>``, up to the next ``<h2>``."""
    return page.split(f"<h2>{heading}</h2>", 1)[1].split("<h2>", 1)[0]


def test_committed_results_make_a_complete_site(committed_site):
    res, out = committed_site
    runs = results.load_runs(res)
    for name in ("index.html", "comparisons.html", "history.html", "profiles.html",
                 "claims.html", "style.css", site.MARKER):  # fmt: skip
        assert (out / name).is_file(), name
    index = (out / "index.html").read_text()
    for run in runs:
        page = out / "runs" / f"{results.slug(run.id)}.html"
        assert page.is_file()
        assert f'href="runs/{page.name}"' in index
        text = page.read_text()
        assert ("migrated from schema 1" in text) == (run.migrated_from == 1)
        assert "Environment" in text and html.escape(run.fields["torch"]) in text
    assert "CPU · Python 3.11.7 · DeepSpeed 0.18.3" in index  # grouped by the versions
    assert "asv publish" in index  # no results/asv-html here: the index says how to make it
    # The committed training runs hold both sides of these two comparisons.
    assert (out / "compare" / "deepspeed-0.18.3-vs-0.18.4.html").is_file()
    assert (out / "compare" / "engine-dsbench-vs-deepspeed.html").is_file()
    # Every comparison is either a page the lists link, or listed as having no data.
    listing = (out / "comparisons.html").read_text()
    for axis in comparisons.AXES:
        has_page = (out / "compare" / f"{axis.slug}.html").is_file()
        assert (f'href="compare/{axis.slug}.html"' in listing) == has_page
        assert (f'href="compare/{axis.slug}.html"' in index) == has_page
        assert (f"{html.escape(axis.title)}</strong> — no data" in listing) != has_page
    _check_links_and_images(out)
    assert len(list((out / "img").glob("*.png"))) >= 6


def test_engine_page_holds_the_compare_table(committed_site):
    """The comparison page's rows are dsbench.compare's: same pairing, ratios, intervals and
    verdicts; it opens with the sorted ratio chart, then the table."""
    res, out = committed_site
    runs = results.load_runs(res)
    both = [r for r in runs if r.doc.get("suite") == "training"
            and {row["params"].get("engine") for row in r.doc["benchmarks"]}
            >= {"dsbench", "deepspeed"}]  # fmt: skip

    def per_engine(run):  # rows on the smaller side; the page takes the widest, newest last
        engines = [row["params"].get("engine") for row in run.doc["benchmarks"]]
        return min(engines.count("deepspeed"), engines.count("dsbench"))

    widest = max(reversed(both), key=per_engine)
    base, cont, _ = compare.pick_runs([widest], "engine=deepspeed", "engine=dsbench")
    rep = compare.report(base, cont, axes={"engine"}, fmt="plain", runs=runs)
    page = _section(
        (out / "compare" / "engine-dsbench-vs-deepspeed.html").read_text(), "training suite"
    )
    assert html.escape(rep.verdict) in page
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    # like-for-like rows (both engines on torch.distributed's collectives) are paired; the rows
    # of dsbench's own shm collectives have no DeepSpeed counterpart
    assert body.count("<tr") == len(rep.rows) == 24
    assert rep.counts["one side only"] == 12
    head = page.split("<thead>", 1)[1].split("</thead>", 1)[0]
    assert re.findall(r"<th[^>]*>([^<]*)</th>", head) == [
        "benchmark", "unit", "baseline", "contender", "ratio", "99% interval", "verdict", "basis"
    ]  # fmt: skip
    for row in rep.rows:
        assert f'title="{html.escape(row.id)}"' in page
        if not row.comparable:
            assert "comm=shm" in row.id and row.change == "only in contender"
            continue
        assert f"<td>{row.ratio:.3f}</td>" in page
        assert f'<tr class="{row.change}">' in body
        assert html.escape(row.basis) in body
        if row.low is not None:
            assert html.escape(compare.interval_text(row)) in body
    # the ratio chart opens the section, before the table; then bars with CIs, % of peak
    # (MFU), and a history once several runs hold both sides
    first = page.index("<figure>")
    assert first < page.index("<table") and "ratio of each case" in page[first : first + 300]
    if rep.counts["inconclusive"] and not (
        rep.counts["better"] + rep.counts["worse"] + rep.counts["unchanged"]
    ):
        assert "The data cannot decide: " in page and "dsbench run --suite training" in page
    if len(both) == 1:
        assert page.count("<figure>") == 3
        assert "No history yet: only one run of this group holds both sides." in page
    else:
        assert page.count("<figure>") == 4 and f"History over the {len(both)} runs" in page
    ds_page = _section(
        (out / "compare" / "deepspeed-0.18.3-vs-0.18.4.html").read_text(), "training suite"
    )
    assert ds_page.count("<figure>") == 4 and "History over the " in ds_page


def test_lists_never_present_noise_as_a_finding(committed_site):
    """Index and comparison list: per pairing the counts of the four verdicts and of rows on
    one side only; where nothing is decided, the plain statement, its reason and the command
    that would decide it."""
    res, out = committed_site
    runs = asv_results.load_all_runs(res)
    listing = (out / "comparisons.html").read_text()
    index = (out / "index.html").read_text()
    for axis_result in comparisons.pair_all(runs):
        for p in axis_result.pairings:
            text = html.escape(comparisons.counts_text(p.report.counts))
            assert text in listing and text in index
            why = comparisons.undecided(axis_result.axis, p)
            decided = sum(p.report.counts[v] for v in ("better", "worse", "unchanged"))
            assert (why is None) == bool(decided)
            if why is not None:
                assert why.startswith("the data cannot decide: ")
                assert "dsbench ab" in why or "dsbench run" in why
                plain = re.sub(r"<[^>]+>", "", listing)
                assert html.escape(why.replace("`", "")) in plain


def test_no_page_shows_an_unexplained_share_above_100_percent(committed_site):
    """A % of peak above 100 is always flagged (⚠ and why), never a bare number."""
    _, out = committed_site
    for page in _pages(out):
        text = html.unescape(re.sub(r"<[^>]+>", " ", page.read_text()))
        for match in re.finditer(r"(?<![\d.])(\d+(?:\.\d+)?)%", text):
            if float(match.group(1)) > 100:
                after = text[match.end() : match.end() + 60]
                assert "⚠" in after or "above" in after, (page, text[match.start() - 80 :][:160])


def test_profiles_roofline_and_claims_pages(committed_site):
    _, out = committed_site
    profiles = (out / "profiles.html").read_text()
    for name in ("a100-40gb-sxm", "a100-80gb-sxm", "mi250x-gcd", "h100-sxm", "h200-sxm", "mi300x"):
        assert f'<th colspan="3" scope="colgroup">{name}</th>' in profiles
        assert (out / "roofline" / f"{name}.html").is_file()
    assert 'class="num modelled"' in profiles and "never measured" in profiles
    assert (out / "cross-profile.csv").read_text().count("\n") > 10
    cpu = (out / "roofline" / "cpu.html").read_text()
    assert "<img" in cpu and "Measured kernels" in cpu and "measured on this machine" in cpu
    assert "gemm[dtype=bfloat16,impl=torch,size=2048]" in cpu
    claims = (out / "claims.html").read_text()
    assert "Not available yet" not in claims, "claims page not built"


# ---------------------------------------------------------------------------- hostile input


def _hostile_results(tmp_path: Path) -> Path:
    """Two runs whose every string is hostile (and one with a mathtext-breaking name), a
    schema-1 file, a corrupt file."""
    res = tmp_path / "results"
    bad_id = f"gemm[size=1,x={HOSTILE}$\\frac{{$]"
    env = {
        "devices": [{"name": HOSTILE}],
        "backend": "cuda",
        "profile": {"name": HOSTILE},
        "packages": {"torch": "2.13.0", "deepspeed": "0.18.3"},
    }
    rows = [
        make_row(bad_id, [10.0 + i * 0.01 for i in range(20)]),
        make_row(f"{HOSTILE}[k=1]", [], status="failed"),
        make_row("allreduce[size=1]", [5.0 + i * 0.01 for i in range(20)]),
    ]
    rows[1]["error"] = f"RuntimeError: {HOSTILE}\n  at line 1"
    rows[0]["notes"] = {"note": HOSTILE}
    rows[0]["pct_of_peak"] = 40.0
    for k, ds in enumerate(("0.18.3", "0.18.4")):
        doc = make_doc(
            f"20261130T000000Z-../../{HOSTILE}",
            f"2026-11-3{k}T00:00:00+00:00",
            rows,
            label=HOSTILE,
            machine=HOSTILE,
            env=dict(env, packages={"torch": "2.13.0", "deepspeed": ds}),
        )
        doc["suite"] = HOSTILE
        write_json(res / "evil" / f"run{k}.json", doc)
    old = make_doc(
        "20261101T000000Z-oldold",
        "2026-11-01T00:00:00+00:00",
        [make_row("adamw[params=1]", [1.0, 2.0, 3.0])],
        label="from-v1",
    )
    old["schema_version"] = 1
    del old["source"]
    write_json(res / "testbox" / "old.json", old)
    (res / "testbox" / "corrupt.json").write_text('{"schema": "dsbench-result", "run_id": ')
    # a soak whose every string is hostile, its stream named outside its folder; the stability
    # claims beside it
    write_soak(res / "evil", "soak", engine="dsbench", hostile=HOSTILE, seed=3)
    (res / "claims").mkdir()
    shutil.copy(REPO / "results" / "claims" / "000-stability-72h.toml", res / "claims")
    return res


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    res = _hostile_results(tmp)
    out = tmp / "site"
    assert _publish(res, out) == 0
    return res, out


def test_hostile_strings_show_as_text(hostile_site):
    _res, out = hostile_site
    escaped = html.escape(HOSTILE)
    index = (out / "index.html").read_text()
    assert index.count(escaped) >= 4  # label, machine, suite, device (group heading and rows)
    pages = _pages(out)
    assert all(p.resolve().is_relative_to(out.resolve()) for p in out.rglob("*"))
    run_pages = sorted(p.name for p in (out / "runs").glob("*.html"))
    stem = results.slug(f"20261130T000000Z-../../{HOSTILE}")  # two runs with that id: 2 pages
    assert run_pages == ["20261101T000000Z-oldold.html", f"{stem}-2.html", f"{stem}.html",
                         "20261201T000003Z-soak03.html"]  # fmt: skip
    evil = (out / "runs" / f"{stem}.html").read_text()
    for text in (
        f"RuntimeError: {escaped}",
        f"gemm[size=1,x={escaped}$\\frac{{$]",
        f"{escaped}[k=1]",
    ):
        assert text in evil
    compare_page = (out / "compare" / "deepspeed-0.18.3-vs-0.18.4.html").read_text()
    assert escaped in compare_page and "<figure>" in compare_page
    stability = (out / "stability.html").read_text()
    for text in (
        f"soak-soak{escaped}",  # the label
        f"mlp{escaped}",  # a parameter
        f"complete{escaped}",  # the status
        f"at step 130{escaped}",  # a launcher's message
        f"{escaped}soak.soak.jsonl&#x27; is not a .soak.jsonl file beside the result file",
    ):
        assert text in stability, text
    assert stability.count("<figure>") == 2  # drawn from the result file, not the named stream
    claims_page = (out / "claims.html").read_text()
    assert f"mlp{escaped}" in claims_page and "100.0% of restarts continued" in claims_page
    _check_links_and_images(out)  # also: no <script anywhere
    assert all(HOSTILE not in p.read_text() for p in pages)


def test_old_schema_migrated_and_corrupt_file_named(hostile_site, capsys):
    res, out = hostile_site
    index = (out / "index.html").read_text()
    assert "1 file(s) skipped" in index and "corrupt.json: corrupt JSON" in index
    assert "from-v1" in index
    old_page = (out / "runs" / "20261101T000000Z-oldold.html").read_text()
    assert "migrated from schema 1" in old_page
    raw = (res / "testbox" / "old.json").read_text()
    assert '"schema_version": 1' in raw and '"source"' not in raw, "the file must not change"


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


def _one_run(res: Path) -> None:
    results.write_run(
        make_doc(
            "20261130T000000Z-aaaaaa",
            "2026-11-30T00:00:00+00:00",
            [make_row("adamw[params=1]", [1.0, 2.0, 3.0])],
        ),
        root=res,
    )


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


def test_comparisons_without_data_say_what_to_run(tmp_path):
    res = tmp_path / "results"
    _one_run(res)
    out = tmp_path / "site"
    assert _publish(res, out) == 0
    assert not (out / "compare").exists()
    listing = (out / "comparisons.html").read_text()
    assert (
        "CUDA vs ROCm</strong> — no data: needs runs matching <code>backend=cuda</code> and "
        "<code>backend=rocm</code>; to get them, run <code>dsbench run</code>" in listing
    )
    assert (
        "<code>dsbench ab --baseline python=3.11 --contender python=3.12 --suite quick</code>"
        in listing
    )
    assert (
        "<code>dsbench ab --baseline deepspeed=0.18.3 --contender deepspeed=0.18.4 --suite "
        "training</code>" in listing
    )
    assert listing.count("— no data") == 4
    assert listing.split("<ul", 1)[1].split("</ul>", 1)[0] in (out / "index.html").read_text()


def _backend_runs(res: Path, launches: int) -> None:
    """A CUDA run and a ROCm run of one gemm case, each ``launches`` launches of 20 samples."""
    for k, (backend, device, value) in enumerate(
        [("cuda", "NVIDIA H100 80GB HBM3", 300.0), ("rocm", "AMD Instinct MI250X", 150.0)]
    ):
        samples = [[value * (1 + 0.002 * j) + i * 0.1 for i in range(20)] for j in range(launches)]
        rows = [make_row("gemm[dtype=float16,size=8192]", samples if launches > 1 else samples[0],
                         unit="TFLOP/s")]  # fmt: skip
        env = {"backend": backend, "devices": [{"name": device}]}
        doc = make_doc(f"2026113{k}T000000Z-{backend}", f"2026-11-3{k}T00:00:00+00:00", rows,
                       env=env, machine=f"{backend}-box")  # fmt: skip
        results.write_run(doc, root=res)


def _backend_site(tmp_path: Path, launches: int) -> tuple[Path, str]:
    """The site of :func:`_backend_runs`, and its CUDA vs ROCm page."""
    res = tmp_path / "results"
    _backend_runs(res, launches)
    out = tmp_path / "site"
    assert _publish(res, out) == 0
    return out, (out / "compare" / "cuda-vs-rocm.html").read_text()


def test_cuda_vs_rocm_page_when_both_backends_exist(tmp_path):
    """One launch per side on two machines: the ratio is shown, the verdict is inconclusive
    (grey, saying why) and the page says plainly that the data cannot decide."""
    out, page = _backend_site(tmp_path, launches=1)
    assert "quick suite" in page and "<td>0.502</td>" in page
    assert '<tr class="inconclusive">' in page and '<tr class="worse">' not in page
    assert "one round per side and no noise figure for this machine and benchmark" in page
    assert "The data cannot decide: one round per side and no noise figure" in page
    assert "different machines" in page  # why no `dsbench ab` can alternate them
    assert "device (NVIDIA H100 80GB HBM3 vs AMD Instinct MI250X)" in page  # a confounder, said
    index = (out / "index.html").read_text()
    assert 'href="compare/cuda-vs-rocm.html"' in index
    assert "0 better, 0 worse, 0 unchanged, 1 inconclusive, 0 on one side only" in index
    assert "the data cannot decide" in index
    assert "CPU · " not in index and "· CUDA · " in index and "· ROCm · " in index
    _check_links_and_images(out)


def test_several_launches_per_side_decide_and_colour_the_row(tmp_path):
    """With five launches a side the 99% interval exists: the row is worse (red), its interval
    and basis are shown, and the list counts it as a finding."""
    out, page = _backend_site(tmp_path, launches=5)
    assert '<tr class="worse">' in page and "<strong>worse</strong>" in page
    assert "5+5 rounds" in page and re.search(r"0\.\d{3}-0\.\d{3}", page)
    assert "The data cannot decide" not in page
    index = (out / "index.html").read_text()
    assert "0 better, 1 worse, 0 unchanged, 0 inconclusive, 0 on one side only" in index


def _verdict_runs(res: Path) -> None:
    """An ab pair (doc["ab"]) of DeepSpeed 0.18.3 vs 0.18.4, 6 launches a side: one case per
    verdict, one case with a single value, one case on one side only, and a newer run measured
    apart that must not be used."""
    rows: dict[str, list] = {"0.18.3": [], "0.18.4": []}
    cases = {  # id: (baseline launch values, contender launch values)
        "adamw[size=1]": ([100, 101, 99, 100, 100.5, 99.5], [130, 131, 129, 130, 130.5, 129.5]),
        "adamw[size=2]": ([100, 101, 99, 100, 100.5, 99.5], [80, 81, 79, 80, 80.5, 79.5]),
        "adamw[size=3]": ([100, 101, 99, 100, 100.5, 99.5], [100, 100.5, 99.5, 101, 99, 100]),
        "adamw[size=4]": ([100, 130, 80, 110, 95, 120], [104, 90, 125, 85, 115, 100]),
    }
    for bid, (b, c) in cases.items():
        for ds, values in (("0.18.3", b), ("0.18.4", c)):
            rows[ds].append(make_row(bid, [[v + 0.01 * i for i in range(10)] for v in values]))
    for ds in rows:
        rows[ds].append(make_row("adamw[size=5]", [42.0]))  # one value (asv --quick)
    rows["0.18.4"].append(make_row("adamw[size=6]", [[1.0, 1.1]] * 2))
    for k, ds in enumerate(("0.18.3", "0.18.4")):
        env = {"packages": {"torch": "2.13.0+cpu", "deepspeed": ds}}
        doc = make_doc(f"2026120{k + 1}T000000Z-ab{k:04d}", f"2026-12-0{k + 1}T00:00:00+00:00",
                       rows[ds], env=env)  # fmt: skip
        doc["ab"] = {"id": "abcd", "side": ("baseline", "contender")[k], "spec": f"deepspeed={ds}"}
        results.write_run(doc, root=res)
    later = make_doc("20261209T000000Z-apart0", "2026-12-09T00:00:00+00:00",
                     [make_row("adamw[size=1]", [500.0 + i for i in range(10)])],
                     env={"packages": {"torch": "2.13.0+cpu", "deepspeed": "0.18.4"}})  # fmt: skip
    results.write_run(later, root=res)


def test_comparison_page_shows_the_four_verdicts_and_the_ratio_chart(tmp_path):
    res = tmp_path / "results"
    _verdict_runs(res)
    out = tmp_path / "site"
    assert _publish(res, out) == 0
    page = (out / "compare" / "deepspeed-0.18.3-vs-0.18.4.html").read_text()
    assert "measured together by dsbench ab abcd (deepspeed=0.18.3 vs deepspeed=0.18.4)" in page
    assert "20261209T000000Z-apart0" not in _section(page, "quick suite").split("<figure>")[0]
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = re.findall(r'<tr class="([a-z]+)">(.*?)</tr>', body)
    verdicts = {re.search(r'title="([^"]+)"', r).group(1): cls for cls, r in rows}
    assert verdicts == {
        "adamw[size=1]": "better",
        "adamw[size=2]": "worse",
        "adamw[size=3]": "unchanged",
        "adamw[size=4]": "inconclusive",
        "adamw[size=5]": "inconclusive",
        "adamw[size=6]": "missing",
    }
    assert "spread too wide: the interval reaches across x1.05" in body
    assert "one value on a side" in body and "only in contender" in body
    verdict = "1 better, 1 worse, 1 unchanged, 2 inconclusive, 1 on one side only"
    assert verdict in (out / "index.html").read_text()
    assert "The data cannot decide" not in page
    # the ratio chart: first on the page, one line per drawn case, as wide as the page allows
    from PIL import Image

    src = re.search(r'<figure><img src="\.\./(img/[^"]+)" alt="[^"]*ratio of each case', page)
    assert src and page.index(src.group(0)) < page.index("<table")
    width, height = Image.open(out / src.group(1)).size
    assert width <= 1200 and height < 600
    caption = page.split(src.group(0), 1)[1].split("</figcaption>", 1)[0]
    assert "1 case(s) have no interval (hollow dot)" in caption
    assert "1 row(s) not on both sides, failed or skipped are not drawn" in caption
    _check_links_and_images(out)


def test_ratio_chart_labels_are_short_and_unique():
    """Mixed benchmarks: each loses the parameters its own cases share, labels stay unique."""
    from dsbench.publish import plots

    ids = [
        "train_step[dtype=float32,engine=dsbench,grad_accum=2,model=mlp,stage=1]",
        "train_step[dtype=float32,engine=dsbench,grad_accum=2,model=mlp,stage=2]",
        "train_step[dtype=float32,engine=deepspeed,grad_accum=2,model=mlp,stage=1]",
        "adamw[impl=torch,params=100000]",
    ]
    labels = plots.case_labels(ids)
    assert labels == [
        "train_step[engine=dsbench,stage=1]",
        "train_step[engine=dsbench,stage=2]",
        "train_step[engine=deepspeed,stage=1]",
        "adamw[impl=torch,params=100000]",
    ]
    assert plots.case_labels(ids[:2]) == plots.short_labels(ids[:2]) == ["stage=1", "stage=2"]


def test_noise_calibration_decides_single_launch_runs(tmp_path):
    """A noise calibration of the machine (doc purpose "noise") gives two single-launch runs an
    interval, is named above the table, and is never a side itself."""
    res = tmp_path / "results"
    for k, (ds, value) in enumerate((("0.18.3", 100.0), ("0.18.4", 150.0))):
        env = {"packages": {"torch": "2.13.0+cpu", "deepspeed": ds}}
        doc = make_doc(f"2026120{k + 1}T000000Z-run{k:03d}", f"2026-12-0{k + 1}T00:00:00+00:00",
                       [make_row("adamw[size=1]", [value + 0.01 * i for i in range(10)])],
                       env=env)  # fmt: skip
        results.write_run(doc, root=res)
    launches = [[100 + d + 0.01 * i for i in range(10)] for d in (0, 1, -1, 0.5, -0.5)]
    noise = make_doc("20261205T000000Z-noise0", "2026-12-05T00:00:00+00:00",
                     [make_row("adamw[size=1]", launches)],
                     env={"packages": {"torch": "2.13.0+cpu", "deepspeed": "0.18.4"}})  # fmt: skip
    noise["purpose"] = "noise"
    results.write_run(noise, root=res)
    out = tmp_path / "site"
    assert _publish(res, out) == 0
    page = (out / "compare" / "deepspeed-0.18.3-vs-0.18.4.html").read_text()
    assert "noise figure: run 20261205T000000Z-noise0" in page
    assert '<tr class="better">' in page
    assert "contender: run 20261202T000000Z-run001" in page
    assert "noise calibration" in (out / "index.html").read_text()


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


# ---------------------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def chromium():
    from tests._chromium import find_chromium

    exe = find_chromium()
    if exe is None:  # make test installs it; try here too, for a bare `pytest`
        proc = subprocess.run(
            ["sh", str(REPO / "tests" / "install_chromium.sh")],
            capture_output=True,
            text=True,
            timeout=1200,
        )
        exe = find_chromium()
        if exe is None:
            why = (proc.stderr or proc.stdout).strip().splitlines()
            reason = "Chromium is not installed and could not be installed: " + (
                why[-1] if why else f"install_chromium.sh exit {proc.returncode}"
            )
            if os.environ.get("CI"):  # CI must run the browser checks
                pytest.fail(reason + " (required when CI is set)")
            pytest.skip(reason)
    return exe


@pytest.fixture(scope="module")
def soak_site(tmp_path_factory):
    """Two synthetic soaks (one with a stream, one without) and the shipped claims."""
    tmp = tmp_path_factory.mktemp("soak")
    res = soak_results(tmp / "results", REPO / "results" / "claims")
    out = tmp / "site"
    assert _publish(res, out) == 0
    return res, out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("which", "page"),
    [
        ("committed", "index.html"),
        ("committed", "compare/engine-dsbench-vs-deepspeed.html"),
        ("committed", "roofline/cpu.html"),
        ("committed", "claims.html"),  # the seed articles' Chinese titles (fonts-noto-cjk)
        ("committed", "stability.html"),
        ("hostile", "index.html"),
        ("hostile", "compare/deepspeed-0.18.3-vs-0.18.4.html"),
        ("hostile", "stability.html"),
        ("soak", "stability.html"),
        ("soak", "claims.html"),
    ],
)
def test_pages_in_headless_chromium(
    chromium, committed_site, hostile_site, soak_site, tmp_path, which, page
):
    from tests._chromium import open_page

    out = {"committed": committed_site, "hostile": hostile_site, "soak": soak_site}[which][1]
    shot = tmp_path / f"{which}-{page.replace('/', '-')}.png"
    report = open_page(chromium, out / page, shot, tmp_path)
    print(f"screenshot: {shot}")
    assert report.errors == []
    assert report.external == []
    assert report.scripts == 0
    if "No soak results yet" not in report.text:  # a stability page without soaks: no table
        assert report.tables >= 1 and report.table_rows >= 1
    assert report.title.endswith("· dsbench")
    assert all(img["complete"] and img["width"] > 0 for img in report.images), report.images
    if page.startswith("compare/") or page.startswith("roofline/") or which == "soak":
        assert report.images or page == "claims.html", "a page without its charts"
    if which == "soak":  # two soaks, two charts each; every stability claim has a soak
        assert len(report.images) == (4 if page == "stability.html" else 0)
        assert "not measured" not in report.text
    if which == "hostile":
        assert HOSTILE in report.text  # shown as text, not run
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_training_run_page_shows_the_step_phases_against_the_floor(tmp_path):
    """Training rows that profiled their step get a stacked bar of its phases, the floor and
    the timed step marked, and the DeepSpeed note in the caption (escaped)."""
    res = tmp_path / "results"
    rows = []
    for engine, note in (("dsbench", None), ("deepspeed", f"waits not separable {HOSTILE}")):
        row = make_row(f"train_step[engine={engine},stage=1]", [500.0, 510.0, 490.0],
                       unit="samples/s")  # fmt: skip
        phases = {"forward": 10.0, "backward": 20.0, "reduce_scatter": 12.0, "optimizer": 3.0,
                  "allgather": 8.0, "other": 5.0} | ({"note": note} if note else {})  # fmt: skip
        row["notes"] = {"phases_ms": phases, "floor_ms": {"forward_backward": 27.0}}
        row["work"] = {"floor_s": 0.030}
        row["metrics"] = {"time": {"value": 64.0, "unit": "ms", "direction": "lower"}}
        rows.append(row)
    results.write_run(make_doc("20261201T000000Z-bbbbbb", "2026-12-01T00:00:00+00:00", rows),
                      root=res)  # fmt: skip
    out = tmp_path / "site"
    assert _publish(res, out) == 0
    (page,) = [p for p in (out / "runs").glob("*.html") if "bbbbbb" in p.name]
    text = page.read_text()
    section = _section(text, "Where the step&#x27;s time goes")
    assert "<img" in section and "compute-only floor" in section
    assert html.escape(f"waits not separable {HOSTILE}") in section and HOSTILE not in text
    _check_links_and_images(out)
