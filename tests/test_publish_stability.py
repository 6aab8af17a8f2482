"""dsbench publish's stability page and the stability claims beside the soaks, from synthetic
soak files (tests/_soak_files.py): what was run, the curves (from the stream, from the result
file when the stream is missing, none when neither has them), the drift verdicts, the fault
table, the loss anomalies; the claims page's stability table with its scale sentence, "not
measured" without soaks; the claims' ``soak`` mapping and its validation. Hostile strings and
the browser check are in tests/test_publish.py."""

import html
import json
import re

import pytest

from dsbench.publish.data import claims
from tests._soak_files import soak_results, write_soak
from tests.conftest import SHIPPED_CLAIMS as SHIPPED
from tests.test_claims import GOOD
from tests.test_publish import _check_links_and_images, _one_run, _publish


@pytest.fixture(scope="module")
def soak_site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("soak")
    res = soak_results(tmp / "results", SHIPPED)
    out = tmp / "site"
    assert _publish(res, out) == 0
    return res, out


def _text(page: str) -> str:
    """The page as a reader sees it: tags dropped, entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _sections(page: str) -> dict[str, str]:
    """Each soak's part of the stability page, by its label."""
    parts = re.split(r'<h2 id="soak-\d+">', page)[1:]
    return {p.split("</h2>", 1)[0]: p for p in parts}


def _memory_fits(res) -> dict[tuple[str, int | None], tuple[str, float]]:
    """(soak label, rank) -> (verdict, slope) of the host resident memory's drift fit, from
    :mod:`dsbench.publish.data.soaks`."""
    from dsbench.publish.data.soaks import drifting, fits, rank_of, soak_files
    from dsbench.results import asv as asv_results

    out = {}
    for soak in soak_files(asv_results.load_all_runs(res)):
        for d in drifting(soak):
            for row in soak.row(d.row) if d.what == "host resident memory" else []:
                for _, fit in fits(row):
                    out[(soak.run.label, rank_of(row))] = (fit["verdict"], fit["slope"])
    return out


def test_the_stability_page_shows_each_soak(soak_site):
    _, out = soak_site
    index = (out / "index.html").read_text()
    assert index.count('href="stability.html"') == 2  # the navigation bar and the list
    page = (out / "stability.html").read_text()
    soaks = _sections(page)
    assert list(soaks) == ["soak-zero2-dsbench", "soak-zero3-ds"]  # newest first
    zero3, zero2 = _text(soaks["soak-zero3-ds"]), _text(soaks["soak-zero2-dsbench"])
    # what was run, plainly: the facts (data.soaks.soak_facts), then the page
    from dsbench.publish.data.soaks import soak_facts, soak_files
    from dsbench.results import asv as asv_results

    by_label = {x.run.label: dict(soak_facts(x)) for x in soak_files(
        asv_results.load_all_runs(soak_site[0]))}  # fmt: skip
    facts3 = by_label["soak-zero3-ds"]
    assert (facts3["engine"], str(facts3["ZeRO stage"]), facts3["offload"]) == (
        "DeepSpeed 0.18.4", "3", "none"
    )  # fmt: skip
    assert facts3["job"] == "400 steps; the reference run trained 400"
    assert facts3["training time"] == "2 min 00 s over 4 launch(es)"
    assert facts3["faults"] == "1 kill, 1 hang, 0 term" and facts3["status"] == "complete"
    assert facts3["command"].startswith("dsbench ")
    assert by_label["soak-zero2-dsbench"]["engine"] == (
        "dsbench's ZeRO engine; DeepSpeed 0.18.4 installed, not used by it"
    )
    for fact in ("engine DeepSpeed 0.18.4", "ZeRO stage 3", "precision bf16", "offload none",
                 "model mlp", "ranks 2", "job 400 steps; the reference run trained 400",
                 "training time 2 min 00 s over 4 launch(es)", "faults 1 kill, 1 hang, 0 term",
                 "warm-up 40 steps", "machine testbox: CPU only (Test CPU, 2 logical CPUs)",
                 "status complete"):  # fmt: skip
        assert fact in zero3, fact
    assert "engine dsbench's ZeRO engine; DeepSpeed 0.18.4 installed, not used by it" in zero2
    # drift: memory growing 50 MiB per 1,000 steps in the one, flat in the other (the fits,
    # then the page's drift table)
    fitted = _memory_fits(soak_site[0])
    assert {k: v for k, v in fitted.items() if k[0] == "soak-zero3-ds"} == {
        ("soak-zero3-ds", 0): ("growing", pytest.approx(50, abs=0.1)),
        ("soak-zero3-ds", 1): ("growing", pytest.approx(50, abs=0.1)),
    }
    assert [v[0] for k, v in sorted(fitted.items()) if k[0] == "soak-zero2-dsbench"] == [
        "flat", "flat"
    ]  # fmt: skip
    for rank in (0, 1):
        assert (
            f'<tr class="growing"><td>host resident memory</td><td>{rank}</td>'
            in (soaks["soak-zero3-ds"])
        )
        assert (
            f'<tr class="flat"><td>host resident memory</td><td>{rank}</td>'
            in (soaks["soak-zero2-dsbench"])
        )
    assert re.search(r"host resident memory 0 (49\.9\d*|50\.0\d*) MiB/1k steps", zero3)
    # the fault table: injected by kind, detected, named, restarts, bit-identical, the rate
    totals = "1 kill, 1 hang, 0 term 0 2 2 median 6.25 s, max 12 s 2 2 100.0% 0 in 2 min 00 s"
    assert f"{totals} of training" in zero3
    assert "each fault (2)" in zero3 and "rank 1 of 2 stopped responding at step 250" in zero3
    assert "No faults injected" in zero2
    assert "anomalies in all 0" in zero3 and "loss scale not used" in zero3


def test_curves_come_from_the_stream_or_say_where_they_come_from(soak_site):
    _, out = soak_site
    soaks = _sections((out / "stability.html").read_text())
    with_stream, without = soaks["soak-zero3-ds"], soaks["soak-zero2-dsbench"]
    assert with_stream.count("<figure>") == without.count("<figure>") == 2
    assert with_stream.count("from the sample stream zero3-ds.soak.jsonl") == 2
    assert 'class="warn">the sample stream zero2-dsbench.soak.jsonl is missing beside the ' in (
        without
    )
    assert "curves drawn from what the result file keeps" in without
    assert "step time of the reference run" in _text(without).lower()
    assert "from the result file, after warm-up only" in without
    _check_links_and_images(out)  # every chart a PNG of the site


def test_a_soak_without_curves_or_with_a_damaged_stream(tmp_path):
    """No stream and no series kept: said, no chart, no crash. A stream with lines that are
    not samples: those are counted and left out."""
    res = tmp_path / "results"
    bare = write_soak(res / "box", "bare", faults=False, seed=4)
    (res / "box" / "bare.soak.jsonl").unlink()
    doc = json.loads(bare.read_text())
    for row in doc["benchmarks"]:
        row.get("drift", {}).pop("series", None)
        row.pop("sample_steps", None)
    bare.write_text(json.dumps(doc))
    write_soak(res / "box", "damaged", faults=False, seed=5)
    with (res / "box" / "damaged.soak.jsonl").open("a") as f:
        f.write('{"kind": "sample", "run": "reference", "rank": "x"}\nnot json\n[1]\n')
    out = tmp_path / "site"
    assert _publish(res, out) == 0
    soaks = _sections((out / "stability.html").read_text())
    assert "is missing beside the result file; no curves to draw." in soaks["soak-bare"]
    assert "<figure>" not in soaks["soak-bare"] and 'class="flat"' in soaks["soak-bare"]
    damaged = soaks["soak-damaged"]
    assert damaged.count("(2 line(s) that were not readable samples left out)") == 2


def test_a_soak_merged_by_dsbench_ab_lists_each_launch_fit(tmp_path):
    """``dsbench ab --soak`` merges a side's launches: no soak section, no stream, each drift
    row's fits per launch (``launch_drifts``)."""
    res = tmp_path / "results"
    path = write_soak(res / "box", "side", faults=False, seed=6)
    (res / "box" / "side.soak.jsonl").unlink()
    doc = json.loads(path.read_text())
    del doc["soak"]
    doc["ab"] = {"id": "abcd", "side": "baseline", "spec": "deepspeed=0.18.3"}
    doc["launches"] = [{"run_id": "a"}, {"run_id": "b"}]
    for row in doc["benchmarks"]:
        if row.get("drift"):
            row["launch_drifts"], row["drift"] = [row["drift"], row["drift"]], None
    path.write_text(json.dumps(doc))
    out = tmp_path / "site"
    assert _publish(res, out) == 0
    (page,) = _sections((out / "stability.html").read_text()).values()
    assert "no sample stream: dsbench ab merged 2 launches of the soak into this file" in page
    assert "<figure>" not in page and "dsbench ab</th><td>2 launches merged" in page
    assert page.count("<td>0 (launch 1)</td>") == 2  # rank 0: memory and step time


def _soak_claims(res):
    """The soaks of the results folder ``res``, and the shipped claims with a ``soak`` mapping."""
    from dsbench.publish.data.soaks import soak_files
    from dsbench.results import asv as asv_results

    wanted = [c for c in claims.load_claims(SHIPPED) if c.dsbench.soak is not None]
    return soak_files(asv_results.load_all_runs(res)), wanted


def test_the_claims_page_sets_the_stability_claims_beside_the_soaks(soak_site):
    """Each stability claim beside what every matching soak shows (asserted on
    :func:`dsbench.publish.data.soak_claims.soak_lines`), the page's table a row per claim."""
    from dsbench.publish.data.soak_claims import soak_lines, to_measure

    res, out = soak_site
    soaks, wanted = _soak_claims(res)
    assert len(wanted) == 8
    by_label = {c.label: (c, [str(x) for x in soak_lines(c, soaks)]) for c in wanted}
    assert all(lines for _, lines in by_label.values())  # every claim measured by some soak
    claim, resume = by_label["恢复训练成功率"]
    claimed = [f"{s.label}: {s.text}" for s in (claim.baseline, claim.contender)]
    assert claimed == ["v0.18.3: 82%", "v0.18.4: 99.6%"]  # the claim, as printed
    assert (
        "DeepSpeed 0.18.4 · ZeRO-3 bf16 · no offload · mlp, 2 ranks · 400 steps · 3 min 20 s "
        "(the claim's v0.18.4 side): 100.0% of restarts continued bit for bit (2 of 2)" in resume
    )
    assert to_measure(claim).startswith(
        "dsbench ab --baseline deepspeed=0.18.3 --contender deepspeed=0.18.4"
    )
    mtbf = " | ".join(by_label["平均无故障时间"][1])
    assert "no failure nobody injected in 2 min 00 s of training" in mtbf
    assert "no failure nobody injected in 1 min 00 s of training" in mtbf  # the dsbench soak
    growth = " | ".join(by_label["ZeRO-3在长时间训练时的显存缓慢增长问题（GitHub issue #4567）"][1])
    assert re.search(r"host resident memory: rank 0: growing, (49\.9|50)", growth)
    assert "ZeRO-2" not in growth  # only the ZeRO-3 soak fits stage = 3
    fluctuation = " | ".join(by_label["显存波动范围"][1])
    assert re.search(r"host resident memory: ±\d+(\.\d+)? MiB around", fluctuation)
    # the page (smoke): the scale sentence, a row per claim, none missing
    page = (out / "claims.html").read_text()
    table = page.split('<h2 id="stability">', 1)[1].split("<h2", 1)[0]
    text = _text(table)
    assert (
        "Measured: 2 soak(s) of 400 steps, 3 min 00 s of training in all, on testbox: CPU only "
        "(Test CPU, 2 logical CPUs). Claimed: a 72-hour stability test (hardware: not stated for "
        "this table)" in text
    )
    assert "nothing here calls a claim consistent or contradicted" in text
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table.split("<tbody>", 1)[1])
    assert len(rows) == len(wanted)
    (row,) = [r for r in rows if html.escape(claim.label) in r]
    assert " ".join(claimed) in _text(row)
    assert "not measured" not in text and 'class="missing"' not in table


def test_without_soaks_every_stability_claim_is_not_measured(tmp_path):
    from dsbench.publish.data.soak_claims import not_measured_why, soak_lines, to_measure

    res = tmp_path / "results"
    _one_run(res)
    (res / "claims").mkdir()
    for path in SHIPPED.glob("*.toml"):
        (res / "claims" / path.name).write_text(path.read_text())
    soaks, wanted = _soak_claims(res)
    assert soaks == [] and len(wanted) == 8
    for c in wanted:
        assert soak_lines(c, soaks) == [] and not_measured_why(c.dsbench.soak, soaks) == (
            "no soak result"
        )
    # what would measure the resume rate
    assert any("--faults kill=20,hang=3,term=2" in to_measure(c) for c in wanted)
    # the pages (smoke)
    out = tmp_path / "site"
    assert _publish(res, out) == 0
    table = (out / "claims.html").read_text().split('<h2 id="stability">', 1)[1]
    table = table.split("<h2", 1)[0]
    assert "Measured: </strong>nothing: no soak result." in table
    assert table.count('<tr class="missing">') == 8
    assert table.count("<strong>not measured</strong>: no soak result<") == 8
    stability = _text((out / "stability.html").read_text())
    assert "No soak results yet: dsbench soak --config tests/configs/soak_zero2_bf16.json" in (
        stability
    )


# ---------------------------------------------------------------------------- the claims' soak


SOAK_CLAIM = GOOD.replace(
    """benchmark = "train_step"
params = { engine = "deepspeed" }
metric = "samples_per_s"
baseline = "0.18.3"
contender = "0.18.4"
""",
    """not_measurable = "a soak is not a 72-hour run"

[claims.dsbench.soak]
show = "verdict"
row = ["soak.device_allocated", "soak.memory"]
params = { stage = [2, 3] }
""",
)


def test_a_soak_mapping_loads_beside_not_measurable(tmp_path):
    path = tmp_path / "a.toml"
    path.write_text(SOAK_CLAIM, encoding="utf-8")
    (claim,) = claims.load_claim_file(path)
    assert claim.dsbench.not_measurable == "a soak is not a 72-hour run"
    assert claim.dsbench.soak == claims.SoakSpec(
        "verdict", ("soak.device_allocated", "soak.memory"), {"stage": [2, 3]}
    )
    (entry,) = claims.check([claim], [])
    assert entry.decision == "not measurable"  # a soak decides no claim


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('show = "verdict"', 'show = "plot"'), "soak.show: unknown show 'plot'"),
        (('row = ["soak.device_allocated", "soak.memory"]', 'row = "soak.leak"'),
         "soak.row: unknown soak row 'soak.leak'"),
        (('row = ["soak.device_allocated", "soak.memory"]', "row = 3"),
         "soak.row: expected a row name or a list, got 3"),
        (('row = ["soak.device_allocated", "soak.memory"]\n', ""),
         "soak.row: missing: show = 'verdict' needs a soak row"),
        (("params = { stage = [2, 3] }", "params = { zero = 3 }"),
         "soak.params.zero: not a soak parameter; valid: engine, model, nproc, precision, rank"),
        (("params = { stage = [2, 3] }", "params = { stage = [] }"),
         "soak.params.stage: expected a value or a list of values, got a list"),
        (('show = "verdict"', 'show = "verdict"\nlength = 1'), "soak.length: unknown field"),
    ],
)  # fmt: skip
def test_a_bad_soak_mapping_is_one_line_naming_the_field(tmp_path, change, message):
    path = tmp_path / "a.toml"
    path.write_text(SOAK_CLAIM.replace(*change), encoding="utf-8")
    with pytest.raises(claims.ClaimError) as err:
        claims.load_claim_file(path)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith(f"{path}: claims[0] 'train': dsbench.soak.")
