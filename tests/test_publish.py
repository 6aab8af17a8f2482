"""dsbench publish: a static site from the fixture runs (tests/fixtures/results, copied from
reference runs) and from hostile ones (hostile strings, an old schema, a corrupt file), checked
file by file and, in headless Chromium, as a browser shows it; a training run's step phases.
The comparison pages from synthetic runs are in tests/test_publish_comparisons.py, the results
and output folders (bad input, asv's runs) in tests/test_publish_folders.py, the stability page
in tests/test_publish_stability.py."""

import html
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from dsbench import compare, results
from dsbench.cli import main
from dsbench.publish import site
from dsbench.publish.data import families, modelled, pairings
from dsbench.publish.data.axes import AXES
from dsbench.results import asv as asv_results
from tests._soak_files import soak_results, write_soak
from tests.conftest import FIXTURE_RESULTS, REPO, SHIPPED_CLAIMS, make_doc, make_row, write_json

HOSTILE = "<script>alert(1)</script>"
SHOTS = Path(tempfile.gettempdir()) / "shots"
"""Where the browser test also copies its screenshots, for a person to look at."""
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


def _section(page: str, heading: str) -> str:
    """The part of a comparison page under ``<h2>heading</h2>``, up to the next ``<h2>``."""
    return page.split(f"<h2>{heading}</h2>", 1)[1].split("<h2", 1)[0]


def test_fixture_runs_make_a_complete_site(fixture_site):
    """The site of the fixture runs (tests/conftest.py's ``fixture_site``, published once for
    the session): a page per run, the lists, both comparisons the runs hold, no broken link."""
    res, out = fixture_site.results, fixture_site.out
    runs = asv_results.load_all_runs(res)
    assert len(runs) == len(list(FIXTURE_RESULTS.rglob("*.json"))) == 13  # each file a run
    pages = sorted(p.relative_to(out).as_posix() for p in _pages(out))
    images = sorted((out / "img").glob("*.png"))
    assert f"({len(runs)} runs, {len(pages)} pages, {len(images)} charts)" in fixture_site.summary
    assert sorted(p for p in pages if p.startswith("runs/")) == sorted(
        f"runs/{results.slug(run.id)}.html" for run in runs
    )  # one page per run, nothing else in runs/
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
    assert f"{len(runs)} run(s) from 2 machine(s) (devbox-2c-epyc, vm)" in index
    assert "CPU · Python 3.11.7 · DeepSpeed 0.18.3" in index  # grouped by the versions
    assert "asv publish" in index  # no results/asv-html here: the index says how to make it
    # The fixture's training runs hold both sides of these two comparisons, its quick-suite
    # runs dsbench's ring and shm collectives beside torch.distributed's, and only these; its
    # dsbench ab of two commits is a comparison of its own.
    assert sorted(p for p in pages if p.startswith("compare/")) == [
        "compare/commit-2a65ca1-vs-9f9504f.html",
        "compare/deepspeed-0.18.3-vs-0.18.4.html", "compare/engine-dsbench-vs-deepspeed.html",
        "compare/impl-ring-vs-native.html", "compare/impl-shm-vs-native.html",
    ]  # fmt: skip
    # Every comparison is either a page the lists link, or listed as having no data; the
    # index has a panel for each, and says what to run for one without data once.
    listing = (out / "comparisons.html").read_text()
    axes = [r.axis for r in pairings.pair_all(runs)]
    assert [a.slug for a in axes[len(AXES) :]] == [
        "impl-ring-vs-native", "impl-shm-vs-native", "commit-2a65ca1-vs-9f9504f"
    ]  # fmt: skip
    for axis in axes:
        has_page = (out / "compare" / f"{axis.slug}.html").is_file()
        assert (f'href="compare/{axis.slug}.html"' in listing) == has_page
        assert (f'href="compare/{axis.slug}.html"' in index) == has_page
        assert (f"{html.escape(axis.title)}</strong> — no data" in listing) != has_page
        assert index.count(f'id="panel-{axis.slug}"') == 1
        if not has_page:
            assert index.count(html.escape(re.sub(r"`", "", axis.how))[:40]) <= 1
    _check_links_and_images(out)
    linked = {m for p in _pages(out) for m in re.findall(r'src="(?:\.\./)*(img/[^"]+)"',
                                                          p.read_text())}  # fmt: skip
    assert linked == {p.relative_to(out).as_posix() for p in images}  # every chart is shown


def test_engine_page_holds_the_compare_table(fixture_site):
    """The engine comparison's pairing is dsbench.compare's: same pairing, ratios, intervals and
    verdicts (asserted on :mod:`dsbench.publish.data.pairings`); its page opens with the sorted
    ratio chart, then the table of those rows."""
    res, out = fixture_site.results, fixture_site.out
    runs = results.load_runs(res)
    both = [r for r in runs if r.record.to_json().get("suite") == "training"
            and {row["params"].get("engine") for row in r.record.to_json()["benchmarks"]}
            >= {"dsbench", "deepspeed"}]  # fmt: skip

    def per_engine(run):  # rows on the smaller side; the page takes the widest, newest last
        engines = [row["params"].get("engine") for row in run.record.to_json()["benchmarks"]]
        return min(engines.count("deepspeed"), engines.count("dsbench"))

    widest = max(reversed(both), key=per_engine)
    base, cont, _ = compare.pick_runs([widest], "engine=deepspeed", "engine=dsbench")
    rep = compare.report(base, cont, axes={"engine"}, runs=runs)
    engine_axis = next(a for a in AXES if a.slug == "engine-dsbench-vs-deepspeed")
    result = pairings.pair(engine_axis, runs)
    assert result.param and result.has_data
    (p,) = [p for p in result.pairings if p.group == "training suite"]
    assert p.baseline.run is widest and p.contender.run is widest and p.suite == "training"
    assert p.report.verdict == rep.verdict and p.report.counts == rep.counts
    # like-for-like rows (both engines on torch.distributed's collectives) are paired; the rows
    # of dsbench's own shm collectives have no DeepSpeed counterpart (the widest of the two
    # runs that hold both engines: efficiency-after, 6 cases per engine and 6 shm cases)
    assert widest.label == "efficiency-after"
    assert len(p.report.rows) == len(rep.rows) == 12
    assert rep.counts["one side only"] == 6
    for got, row in zip(p.report.rows, rep.rows, strict=True):
        assert (got.id, got.change, got.basis, got.low, got.high) == (
            row.id, row.change, row.basis, row.low, row.high
        )  # fmt: skip
        assert got.ratio == row.ratio or not row.comparable
        if not row.comparable:
            assert "comm=shm" in row.id and row.change == "only in contender"
    # the history chart's runs: both runs that hold both engines; DeepSpeed 0.18.3 vs 0.18.4:
    # every training run (each 0.18.3 or 0.18.4)
    assert [r.label for r in p.runs] == [r.label for r in both]
    assert [r.label for r in both] == ["efficiency-before", "efficiency-after"]
    ds_axis = next(a for a in AXES if a.slug == "deepspeed-0.18.3-vs-0.18.4")
    (ds,) = [p for p in pairings.pair(ds_axis, runs).pairings if p.group == "training suite"]
    training = [r for r in runs if r.suite == "training"]
    assert len(ds.runs) == len(training) == 6
    # what the history charts draw: per case a ratio in each run holding both engines; per
    # case of the DeepSpeed pairing its value in each run relative to the first that has it
    paired = [r.id for r in p.report.rows if r.comparable]
    ratios = pairings.run_ratios(result, p, paired)
    assert all(len(v) == 2 and v[-1] is not None for v in ratios.values())
    ds_ids = [r.id for r in ds.report.rows if r.comparable]
    relative = pairings.relative_values(ds, ds_ids)
    assert all(
        len(v) == 6 and next(x for x in v if x is not None) == 1.0 for v in relative.values()
    )
    # the page (smoke): the verdict, the table's columns and rows, the ratio chart first, then
    # bars with CIs, % of peak (MFU) and the history
    page = _section(
        (out / "compare" / "engine-dsbench-vs-deepspeed.html").read_text(), "training suite"
    )
    assert html.escape(rep.verdict) in page
    head = page.split("<thead>", 1)[1].split("</thead>", 1)[0]
    assert re.findall(r"<th[^>]*>([^<]*)</th>", head) == [
        "benchmark", "unit", "baseline", "contender", "ratio", "99% interval", "verdict", "basis"
    ]  # fmt: skip
    assert all(f'title="{html.escape(row.id)}"' in page for row in rep.rows)
    first = page.index("<figure>")
    assert first < page.index("<table") and "ratio of each case" in page[first : first + 300]
    assert page.count("<figure>") == 4 and "History over the 2 runs" in page
    ds_page = _section(
        (out / "compare" / "deepspeed-0.18.3-vs-0.18.4.html").read_text(), "training suite"
    )
    assert ds_page.count("<figure>") == 4 and f"History over the {len(training)} runs" in ds_page


def test_lists_never_present_noise_as_a_finding(fixture_site):
    """Index and comparison list: per pairing the counts of the four verdicts and of rows on
    one side only; where nothing is decided, the plain statement, its reason and the command
    that would decide it."""
    res, out = fixture_site.results, fixture_site.out
    runs = asv_results.load_all_runs(res)
    listing = (out / "comparisons.html").read_text()
    index = (out / "index.html").read_text()
    for axis_result in pairings.pair_all(runs):
        for p in axis_result.pairings:
            text = html.escape(pairings.counts_text(p.report.counts))
            assert text in listing and text in index
            why = pairings.undecided(axis_result.axis, p)
            decided = sum(p.report.counts[v] for v in ("better", "worse", "unchanged"))
            assert (why is None) == bool(decided)
            if why is not None:
                assert why.startswith("the data cannot decide: ")
                assert "dsbench ab" in why or "dsbench run" in why
                plain = re.sub(r"<[^>]+>", "", listing)
                assert html.escape(why.replace("`", "")) in plain


def test_no_page_shows_an_unexplained_share_above_100_percent(fixture_site):
    """A % of peak above 100 is always flagged (⚠ and why), never a bare number."""
    out = fixture_site.out
    for page in _pages(out):
        text = html.unescape(re.sub(r"<[^>]+>", " ", page.read_text()))
        for match in re.finditer(r"(?<![\d.])(\d+(?:\.\d+)?)%", text):
            if float(match.group(1)) > 100:
                after = text[match.end() : match.end() + 60]
                assert "⚠" in after or "above" in after, (page, text[match.start() - 80 :][:160])


def test_profiles_roofline_and_claims_pages(fixture_site):
    out = fixture_site.out
    profiles = (out / "profiles.html").read_text()
    for name in ("a100-40gb-sxm", "a100-80gb-sxm", "mi250x-gcd", "h100-sxm", "h200-sxm", "mi300x"):
        assert f'<th scope="col">{name}</th>' in profiles
        assert (out / "roofline" / f"{name}.html").is_file()
    assert 'class="modelled"' in profiles and "never measured" in profiles
    # families × profiles, not a row per case: every case stays in cross-profile.csv
    df = modelled.cross_profile_table(asv_results.load_all_runs(fixture_site.results))
    found, _ = families.families(df)
    names = [f.benchmark for f in found]
    assert {"adamw", "gemm", "allreduce", "reduce_scatter", "allgather"} <= set(names)
    assert len(names) == len(set(names)) <= 15
    assert all(set(f.cells) == set(families.profiles_of(df)) for f in found)
    matrix = profiles.split('<table class="matrix">', 1)[1].split("</table>", 1)[0]
    assert re.findall(r"<tr><td><strong>([^<]+)</strong>", matrix) == names  # the page (smoke)
    assert (out / "cross-profile.csv").read_text().count("\n") > 10
    cpu = (out / "roofline" / "cpu.html").read_text()
    assert "<img" in cpu and "Measured kernels" in cpu and "measured on this machine" in cpu
    assert "gemm[dtype=bfloat16,impl=torch,size=2048]" in cpu
    claims = (out / "claims.html").read_text()
    assert "Not available yet" not in claims, "claims page not built"


SITE_PAGES = (25, 45)
"""Pages the fixture site may have (32 when written: 13 runs, 4 comparisons, the lists, 9
rooflines); more means a page per something that should be a row."""
SITE_BYTES = (1_500_000, 6_000_000)
"""Its size in bytes, every file (3.3 MB when written: two thirds PNG charts, 0.6 MB HTML,
0.5 MB CSV)."""


def test_the_fixture_site_stays_within_its_size(fixture_site):
    """The site's page count and total size are within stated bounds (printed, to watch)."""
    out = fixture_site.out
    files = [p for p in out.rglob("*") if p.is_file()]
    by_kind: dict[str, list[int]] = {}
    for f in files:
        by_kind.setdefault(f.suffix or f.name, []).append(f.stat().st_size)
    pages, total = len(_pages(out)), sum(map(sum, by_kind.values()))
    kinds = ", ".join(f"{len(v)} {k} {sum(v) / 1e6:.2f} MB" for k, v in sorted(by_kind.items()))
    print(f"fixture site: {pages} pages, {total / 1e6:.2f} MB in {len(files)} files ({kinds})")
    assert SITE_PAGES[0] <= pages <= SITE_PAGES[1]
    assert SITE_BYTES[0] <= total <= SITE_BYTES[1]


def test_every_table_has_its_csv(fixture_site):
    """Each top-level table of a page sits in a sideways-scrolling box with a "CSV" link to
    its cells, written beside the page by pandas."""
    import pandas as pd

    out = fixture_site.out
    for page in _pages(out):
        text = page.read_text()
        links = re.findall(r'<p class="csv"><a href="([^"]+)" download>CSV</a></p>', text)
        assert text.count('<div class="scroll"><table') == len(links), page
        for name in links:
            df = pd.read_csv(page.parent / name, dtype=str, keep_default_na=False)
            assert len(df) >= 1 or len(df.columns) >= 1, name
    profiles = pd.read_csv(out / "profiles-table-1.csv")
    assert list(profiles.columns[:4]) == ["family", "metric", "unit", "cases"]
    assert "gemm" in set(profiles["family"])


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
    shutil.copy(SHIPPED_CLAIMS / "000-stability-72h.toml", res / "claims")
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
        assert text in evil.replace("<wbr>", "")  # ids may break after "[" and ","
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


def _one_run(res: Path) -> None:
    results.write_run(
        make_doc(
            "20261130T000000Z-aaaaaa",
            "2026-11-30T00:00:00+00:00",
            [make_row("adamw[params=1]", [1.0, 2.0, 3.0])],
        ),
        root=res,
    )


def test_the_history_groups_a_machines_runs_of_one_suite_and_its_settings(tmp_path):
    """The history page's data (:mod:`dsbench.publish.data.history`): a group per machine and
    suite with two runs or more, a case per benchmark name measured ok somewhere, its value per
    run; steps are looked for over the runs of several launches of one setting."""
    from dsbench.publish.data import history

    res = tmp_path / "results"
    for k, (suite, python, launches, ok) in enumerate([
        ("quick", "3.11.7", 3, True), ("quick", "3.11.7", 3, False), ("quick", "3.12.1", 3, True),
        ("quick", "3.11.7", 1, True), ("training", "3.11.7", 3, True),
    ]):  # fmt: skip
        row = make_row("adamw[params=1]", [1.0 + k, 2.0 + k, 3.0 + k])
        if not ok:
            row.update(status="failed", error="boom")
        doc = make_doc(f"2026113{k}T000000Z-aaaaa{k}", f"2026-11-3{k}T00:00:00+00:00", [row],
                       label=f"r{k}", env={"python": {"version": python}})  # fmt: skip
        doc["suite"] = suite
        doc["launches"] = [{"started": doc["created"]}] * launches
        results.write_run(doc, root=res)
    runs = results.load_runs(res)
    (((source, _machine, suite), members),) = history.history_groups(runs)
    assert (source, suite) == ("dsbench", "quick")  # one training run: no history
    assert [r.label for r in members] == ["r0", "r1", "r2", "r3"]
    assert history.cases_by_name(members) == {"adamw": ["adamw[params=1]"]}
    values = history.medians(members, "adamw[params=1]")
    assert values[1] is None and all(v is not None for v in values[:1] + values[2:])
    # several launches and Python 3.11: r0 and r1 (r2 is another setting, r3 one launch)
    assert [[r.label for r in s] for s in history.settings(members)] == [["r0", "r1"]]


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
    res = soak_results(tmp / "results", SHIPPED_CLAIMS)
    out = tmp / "site"
    assert _publish(res, out) == 0
    return res, out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("which", "page"),
    [
        ("fixture", "index.html"),
        ("fixture", "compare/engine-dsbench-vs-deepspeed.html"),
        ("fixture", "profiles.html"),
        ("fixture", "roofline/cpu.html"),
        ("fixture", "claims.html"),  # the seed articles' Chinese titles (fonts-noto-cjk)
        ("fixture", "stability.html"),
        ("hostile", "index.html"),
        ("hostile", "compare/deepspeed-0.18.3-vs-0.18.4.html"),
        ("hostile", "stability.html"),
        ("soak", "stability.html"),
        ("soak", "claims.html"),
    ],
)
def test_pages_in_headless_chromium(
    chromium, fixture_site, hostile_site, soak_site, tmp_path, which, page
):
    from tests._chromium import open_page

    out = {"fixture": fixture_site.out, "hostile": hostile_site[1], "soak": soak_site[1]}[which]
    shot = tmp_path / f"{which}-{page.replace('/', '-')}.png"
    report = open_page(chromium, out / page, shot, tmp_path)
    SHOTS.mkdir(parents=True, exist_ok=True)  # for a person to look at
    shutil.copy(shot, SHOTS / shot.name)
    print(f"screenshot: {shot} (and {SHOTS / shot.name}); scrollWidth {report.scroll_width}")
    assert report.errors == []
    assert report.scroll_width <= 1400, "the page scrolls sideways at 1400 px"
    if page == "index.html":
        _check_panels(report, fixture_site.results if which == "fixture" else hostile_site[0])
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


def _check_panels(report, res: Path) -> None:
    """The index shows a panel per comparison: one with data shows its verdict counts (those
    of dsbench compare's reports, summed over the axis's groups), one without data none."""
    axes = pairings.pair_all(asv_results.load_all_runs(res))
    assert [p["title"] for p in report.panels] == [r.axis.title for r in axes]
    for shown, r in zip(report.panels, axes, strict=True):
        verdicts = ("better", "worse", "unchanged", "inconclusive")
        sums = {v: sum(p.report.counts[v] for p in r.pairings) for v in verdicts}
        assert shown["counts"] == ([f"{sums[v]} {v}" for v in verdicts] if r.has_data else [])
        decided = any(sums[v] for v in verdicts[:3])
        assert shown["images"] == (1 if decided else 0), shown  # the forest plot
    assert "No data yet." in report.text


def test_each_panel_counts_its_verdicts_and_plots_the_largest_decided_changes(fixture_site):
    """A panel's data (:mod:`dsbench.publish.data.panels`): the four verdicts summed over its
    pairings, and the decided cases its forest plot shows, the largest changes first, at most
    :data:`~dsbench.publish.data.panels.MAX_CASES`; the index has a panel per axis (smoke)."""
    import math

    from dsbench.publish.data import panels

    axes = pairings.pair_all(asv_results.load_all_runs(fixture_site.results))
    for r in axes:
        sums = {v: sum(p.report.counts[v] for p in r.pairings) for v in panels.VERDICTS}
        assert dict(panels.verdict_counts(r)) == (sums if r.has_data else {})
        shown, total = panels.decided_cases(r)
        assert len(shown) == min(total, panels.MAX_CASES)
        assert total <= sum(sums[v] for v in panels.DECIDED)
        assert all(row.change in panels.DECIDED for _, row in shown)
        sizes = [abs(math.log(row.ratio)) for _, row in shown]
        assert sizes == sorted(sizes, reverse=True)
    assert any(panels.decided_cases(r)[0] for r in axes)  # some panel has a forest plot
    index = (fixture_site.out / "index.html").read_text()
    assert all(f'id="panel-{r.axis.slug}"' in index for r in axes)


def test_a_claim_goes_on_the_panels_of_the_topics_it_speaks_to():
    """A claim's topics: its selectors' keys (a bare version is DeepSpeed's) and the words of
    its side labels; an A/B's own axis takes only the claims about its two sides."""
    from types import SimpleNamespace

    from dsbench.publish.data import panels
    from dsbench.publish.data.axes import Axis
    from dsbench.publish.data.pairings import AxisResult

    def claim(baseline, contender, labels=("a", "b")):
        return SimpleNamespace(
            dsbench=SimpleNamespace(baseline=baseline, contender=contender),
            baseline=SimpleNamespace(label=labels[0]),
            contender=SimpleNamespace(label=labels[1]),
        )

    python = claim("python=3.11", "python=3.12")
    ds = claim("0.18.3", "0.18.4", ("DeepSpeed v0.18.3", "on ROCm"))
    assert panels.claim_topics(python) == {"python"}
    assert panels.claim_topics(ds) == {"deepspeed", "backend"}
    checked = [(python, "p"), (ds, "d")]
    by_slug = {a.slug: panels.claims_on(AxisResult(a), checked) for a in AXES}
    assert by_slug["python-3.11-vs-3.12"] == [(python, "p")]
    assert by_slug["cuda-vs-rocm"] == by_slug["deepspeed-0.18.3-vs-0.18.4"] == [(ds, "d")]
    own = Axis("x", "x", "python=3.11", "python=3.12", "", "", "quick", found=True)
    assert panels.claims_on(AxisResult(own), checked) == [(python, "p")]


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


def test_publish_and_definitions_load_without_torch(fixture_site):
    """A real publish of the fixture runs and the shipped claims (the session's one publish,
    run with ``-X importtime``; its tests stay in this file, so that xdist runs it on one
    worker) imports no torch, and neither do the benchmark definitions nor
    any publish module: torch is loaded only to run a case."""
    import sys

    assert (fixture_site.out / "index.html").is_file()
    imported = fixture_site.imported
    assert "dsbench.publish.build" in imported  # the list is the publishing process's imports
    assert "torch" not in imported and "dsbench.suites" in imported
    code = (
        "import importlib, pkgutil, sys, dsbench.publish, dsbench.suites\n"
        "for m in pkgutil.walk_packages(dsbench.publish.__path__, 'dsbench.publish.'):\n"
        "    importlib.import_module(m.name)\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
