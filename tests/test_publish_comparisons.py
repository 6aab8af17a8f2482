"""dsbench publish's comparison pages from synthetic runs: no data (what to run), CUDA vs ROCm
on two machines, several launches a side, the four verdicts and the ratio chart of a
``dsbench ab`` pair, short chart labels, and a noise calibration deciding single-launch runs."""

import re
from pathlib import Path

from dsbench import results
from tests.conftest import make_doc, make_row
from tests.test_publish import _check_links_and_images, _one_run, _publish, _section


def test_comparisons_without_data_say_what_to_run(tmp_path):
    """One run: every axis (the four questions and the kernels' one) has no pairing; the
    comparisons list and the index's panels say, once each, what to run."""
    from dsbench.publish.data import pairings

    res = tmp_path / "results"
    _one_run(res)
    axes = pairings.pair_all(results.load_runs(res))
    assert [r.axis.slug for r in axes] == [
        "cuda-vs-rocm", "python-3.11-vs-3.12", "deepspeed-0.18.3-vs-0.18.4",
        "engine-dsbench-vs-deepspeed", "kernels-vs-torch",
    ]  # fmt: skip
    assert not any(r.has_data or r.pairings for r in axes)
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
    assert listing.count("— no data") == 5  # the four axes and the kernels' one
    assert "Kernel implementations vs torch</strong> — no data" in listing
    # the index: a panel per axis, each saying once what to run, with the claims about it
    index = (out / "index.html").read_text()
    panels = re.findall(r'<section class="panel" id="panel-([^"]+)">(.*?)</section>', index, re.S)
    assert [slug for slug, _ in panels] == [
        "cuda-vs-rocm", "python-3.11-vs-3.12", "deepspeed-0.18.3-vs-0.18.4",
        "engine-dsbench-vs-deepspeed", "kernels-vs-torch",
    ]  # fmt: skip
    for _, panel in panels:
        assert panel.count("No data yet.") == 1 and panel.count("To get it, run") == 1
        assert "<img" not in panel
    assert index.count("No data yet.") == 5


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


def _backend_pairing(tmp_path: Path):
    """The CUDA vs ROCm axis and its one pairing of :func:`_backend_runs`' site."""
    from dsbench.publish.data import pairings
    from dsbench.publish.data.axes import AXES

    axis = next(a for a in AXES if a.slug == "cuda-vs-rocm")
    (p,) = pairings.pair(axis, results.load_runs(tmp_path / "results")).pairings
    return axis, p


def test_cuda_vs_rocm_page_when_both_backends_exist(tmp_path):
    """One launch per side on two machines: the ratio is shown, the verdict is inconclusive
    (grey, saying why) and the page says plainly that the data cannot decide."""
    from dsbench.publish.data import pairings

    out, page = _backend_site(tmp_path, launches=1)
    axis, p = _backend_pairing(tmp_path)
    (row,) = p.report.rows
    assert p.group == "quick suite" and f"{row.ratio:.3f}" == "0.502"
    assert row.change == "inconclusive"
    assert "one round per side and no noise figure for this machine and benchmark" in row.basis
    assert pairings.undecided(axis, p).startswith(
        "the data cannot decide: one round per side and no noise figure"
    )
    assert pairings.counts_text(p.report.counts) == (
        "0 better, 0 worse, 0 unchanged, 1 inconclusive, 0 on one side only"
    )
    # the page and the index (smoke)
    assert "<td>0.502</td>" in page and '<tr class="inconclusive">' in page
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
    from dsbench import compare
    from dsbench.publish.data import pairings

    out, page = _backend_site(tmp_path, launches=5)
    axis, p = _backend_pairing(tmp_path)
    (row,) = p.report.rows
    assert row.change == "worse" and "5+5 rounds" in row.basis
    assert re.fullmatch(r"0\.\d{3}-0\.\d{3}", compare.interval_text(row))
    assert pairings.undecided(axis, p) is None
    # the page and the index (smoke)
    assert '<tr class="worse">' in page and "<strong>worse</strong>" in page
    assert compare.interval_text(row) in page and "The data cannot decide" not in page
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
    """The ab pair is the pairing (not the newer run measured apart), with one row per verdict,
    each with its reason (asserted on the pairing's report); the page shows them, opening with
    the ratio chart."""
    from dsbench.publish.data import pairings
    from dsbench.publish.data.axes import AXES

    res = tmp_path / "results"
    _verdict_runs(res)
    axis = next(a for a in AXES if a.slug == "deepspeed-0.18.3-vs-0.18.4")
    (p,) = pairings.pair(axis, results.load_runs(res)).pairings
    assert (p.baseline.run.id, p.contender.run.id) == (
        "20261201T000000Z-ab0000", "20261202T000000Z-ab0001"
    )  # fmt: skip
    assert any(
        "measured together by dsbench ab abcd (deepspeed=0.18.3 vs deepspeed=0.18.4)" in note
        for note in p.report.notes
    )
    rows = {r.id: r for r in p.report.rows}
    assert {i: r.change for i, r in rows.items()} == {
        "adamw[size=1]": "better",
        "adamw[size=2]": "worse",
        "adamw[size=3]": "unchanged",
        "adamw[size=4]": "inconclusive",
        "adamw[size=5]": "inconclusive",
        "adamw[size=6]": "only in contender",
    }
    assert not rows["adamw[size=6]"].comparable
    assert rows["adamw[size=4]"].basis.startswith(
        "spread too wide: the interval reaches across x1.05"
    )
    assert "one value on a side" in rows["adamw[size=5]"].basis
    verdict = "1 better, 1 worse, 1 unchanged, 2 inconclusive, 1 on one side only"
    assert pairings.counts_text(p.report.counts) == verdict
    assert pairings.undecided(axis, p) is None
    # the page and the index (smoke): the rows coloured by verdict, the counts listed
    out = tmp_path / "site"
    assert _publish(res, out) == 0
    page = (out / "compare" / "deepspeed-0.18.3-vs-0.18.4.html").read_text()
    assert "20261209T000000Z-apart0" not in _section(page, "quick suite").split("<figure>")[0]
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    classes = re.findall(r'<tr class="([a-z]+)">', body)
    assert sorted(classes) == sorted(["better", "worse", "unchanged", "inconclusive",
                                      "inconclusive", "missing"])  # fmt: skip
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


def test_an_ab_pair_outside_the_missions_axes_gets_its_own_page_and_panel(tmp_path):
    """DeepSpeed 0.17.2 vs 0.19.8 measured by dsbench ab: a page and an index panel of its own,
    with no claim about 0.18.3 vs 0.18.4 on it; the 0.18.3 vs 0.18.4 pair stays on its axis
    and an A/A pair (the same side twice) is no comparison."""
    from dsbench.publish.data import axes
    from tests.conftest import write_json

    res = tmp_path / "results"
    _verdict_runs(res)  # deepspeed=0.18.3 vs deepspeed=0.18.4: the mission's axis
    pairs = {"old-new": ("0.17.2", "0.19.8", 100.0, 80.0), "aa": ("0.19.8", "0.19.8", 80.0, 80.0)}
    for n, (ab_id, (b_ds, c_ds, b_val, c_val)) in enumerate(pairs.items()):
        for k, (ds, val) in enumerate(((b_ds, b_val), (c_ds, c_val))):
            rounds = [[val * (1 + 0.001 * j) + 0.01 * i for i in range(10)] for j in range(6)]
            run_id, created = f"2026121{n}T00000{k}Z-{ab_id[:2]}{k:04d}", f"2026-12-1{n}T00:00:0{k}"
            doc = make_doc(run_id, f"{created}+00:00",
                           [make_row("train_step[stage=3]", rounds, unit="samples/s")],
                           env={"packages": {"torch": "2.13.0+cpu", "deepspeed": ds}})  # fmt: skip
            doc["suite"] = "training"
            doc["ab"] = {
                "id": ab_id,
                "side": ("baseline", "contender")[k],
                "spec": f"deepspeed={ds}",
            }
            write_json(res / "testbox" / f"{ab_id}-{k}.json", doc)
    runs = results.load_runs(res)
    found = axes.ab_axes(runs)
    assert [(a.slug, a.title, a.baseline, a.contender) for a in found] == [
        ("deepspeed-0.17.2-vs-0.19.8", "DeepSpeed 0.17.2 vs 0.19.8", "deepspeed=0.17.2",
         "deepspeed=0.19.8"),
    ]  # fmt: skip
    out = tmp_path / "site"
    assert _publish(res, out) == 0
    page = (out / "compare" / "deepspeed-0.17.2-vs-0.19.8.html").read_text()
    assert "measured together by dsbench ab old-new" in page
    assert "1 worse, 0 unchanged" in page  # 100 -> 80 samples/s in every round
    index = (out / "index.html").read_text()
    found_panel = r'<section class="panel" id="panel-deepspeed-0.17.2-vs-0.19.8">(.*?)</section>'
    panel = re.search(found_panel, index, re.S).group(1)
    assert "No published claim about this comparison." in panel
    assert index.count('<section class="panel"') == len(axes.AXES) + 2  # + kernels'
    _check_links_and_images(out)


def test_history_tick_labels_keep_the_end_that_tells_an_ab_pairs_sides_apart():
    from dsbench.publish import plots

    sides = [plots.text(f"ds0172-vs-0198-zero3-blocks-{s}", 28, middle=True)
             for s in ("baseline", "contender")]  # fmt: skip
    assert sides == ["ds0172-vs-019…locks-baseline", "ds0172-vs-019…ocks-contender"]
    assert all(len(x) == 28 for x in sides)
    assert plots.text("ds-series-deepspeed=0.17.2", 28, middle=True) == "ds-series-deepspeed=0.17.2"


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


def test_launch_rounds_and_block_rounds_of_one_axis_are_both_shown(tmp_path):
    """Two `dsbench ab` pairs of one axis in one group (launch rounds, then block rounds over
    fewer cases): the comparison page and the index show both, each named by how it was
    measured, and the block pair is judged block pair by block pair."""
    import numpy as np

    res = tmp_path / "results"
    _verdict_runs(res)
    rng = np.random.default_rng(0)
    load = [np.exp(rng.normal(0, 0.2, 8)) for _ in range(4)]  # shared by the paired blocks
    for k, (ds, scale) in enumerate((("0.18.3", 1.0), ("0.18.4", 0.8))):
        blocks = [[100 * scale * x * (1 + 0.001 * i) for i in range(5)] for r in load for x in r]
        per_launch = [[x for b in blocks[r * 8 : r * 8 + 8] for x in b] for r in range(4)]
        row = make_row("adamw[size=1]", per_launch)
        row["rounds"] = [{"launch": b // 8, "n": 5} for b in range(32)]
        env = {"packages": {"torch": "2.13.0+cpu", "deepspeed": ds}}
        doc = make_doc(f"2026121{k}T000000Z-bl{k:04d}", f"2026-12-1{k}T00:00:00+00:00", [row],
                       env=env)  # fmt: skip
        doc["ab"] = {"id": "blocks1", "side": ("baseline", "contender")[k],
                     "spec": f"deepspeed={ds}", "pairing": "blocks", "block_pairs": 4}  # fmt: skip
        results.write_run(doc, root=res)
    out = tmp_path / "site"
    assert _publish(res, out) == 0
    page = next((out / "compare").glob("deepspeed*.html")).read_text()
    assert "quick suite (launch rounds)" in page and "quick suite (block rounds)" in page
    assert "paired t(3) 4 rounds of 8+ block pairs" in page
    assert "both sides resident, taking turns in blocks" in page


def test_an_undecided_soak_ab_is_told_more_soaks_not_a_suite():
    """A soak A/B of 2 rounds cannot pass the exact test; what would decide it is the same soak
    command with more rounds (not `--suite training`), and its slopes are read from their
    drift verdicts."""
    from types import SimpleNamespace

    from dsbench.publish.data.axes import AXES
    from dsbench.publish.data.pairings import SOAK_ROUNDS, decide_text

    argv = ["ab", "--baseline", "deepspeed=0.18.3", "--contender", "deepspeed=0.18.4",
            "--rounds", "2", "--soak=--model mlp --steps 200 --faults kill=3"]  # fmt: skip
    run = SimpleNamespace(record=SimpleNamespace(argv=argv))
    p = SimpleNamespace(suite="soak", baseline=SimpleNamespace(run=run))
    axis = next(a for a in AXES if a.baseline.startswith("deepspeed"))
    text = decide_text(axis, p)
    assert f"--rounds {SOAK_ROUNDS} '--soak=--model mlp --steps 200 --faults kill=3'" in text
    assert "--suite" not in text and "drift verdict" in text
    p.baseline.run.record.argv = ["run", "--suite", "quick"]  # not an ab: the general form
    assert f"dsbench ab --rounds {SOAK_ROUNDS} --soak='ARGS'" in decide_text(axis, p)


def test_a_partly_decided_pairing_says_why_the_rest_is_not():
    """13 rows unchanged and 29 inconclusive, most too wide: the summary names how many are not
    decided and why, and that more rounds would decide them (their rows say how many); a
    pairing with every row decided says nothing more than its counts."""
    from types import SimpleNamespace

    from dsbench.compare import Change, ComparedRow, Reason, tally
    from dsbench.publish.data.pairings import partly_undecided

    def row(change, reasons=(), to_decide=None):
        return ComparedRow(id="x", unit="u", direction="higher", baseline=1.0, contender=1.0,
                           ratio=1.0, change=change, reasons=reasons, to_decide=to_decide,
                           factor=1.05)  # fmt: skip

    wide = (Reason.SPREAD_TOO_WIDE,)
    rows = [row(Change.UNCHANGED)] * 13 + [row(Change.INCONCLUSIVE, wide, 30)] * 27
    rows += [row(Change.INCONCLUSIVE, (Reason.TOO_FEW_SAMPLES,))] * 2
    p = SimpleNamespace(report=SimpleNamespace(rows=rows, counts=tally(rows)))
    assert partly_undecided(p) == (
        "29 not decided: spread too wide: the interval reaches across x1.05 (27 of them); "
        "more rounds would decide them, each row says how many"
    )
    p.report = SimpleNamespace(rows=rows[:13], counts=tally(rows[:13]))
    assert partly_undecided(p) is None
