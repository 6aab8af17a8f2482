"""Memory-bound rows under simulated machines (dsbench.hardware.caches): the suites' AdamW sizes
follow the last-level cache, a row whose working set sits in a cache gets no share of the DRAM
ceiling, and the ceiling check fails a row only for a count no healthy machine could produce.

Machines are simulated by what dsbench reads of them: a sysfs cache tree, torch's device
properties (faked on the torch module), the cache levels the runner asks for. No assertion rests
on timing: the rows are built from given samples."""

import types
from pathlib import Path

import pytest
import torch

from dsbench.envinfo.report import format_env
from dsbench.hardware import ProfileError, get_profile, load_profile_file
from dsbench.hardware.caches import (
    DRAM,
    PARTLY,
    RESIDENT,
    CacheLevel,
    cpu_cache_levels,
    ladder_sizes,
    last_level,
    residency,
)
from dsbench.measure import runner
from dsbench.measure.timing import Measurement, device_cache_levels
from dsbench.stats import summarize
from dsbench.suites import ceilings
from dsbench.suites.base import Benchmark, Case, Context, Work, gbps
from dsbench.suites.optim import ADAMW, ADAMW_STATE_BYTES_PER_PARAM

MiB = 2**20
CPU_LLCS = [2 * MiB, 32 * MiB, 105 * MiB, 768 * MiB]
GPU_LLCS = [50 * MiB, 256 * MiB]


def _sizes(ctx: Context, suite: str = "quick") -> list[int]:
    return ADAMW.grid(suite, ctx)["params"]


@pytest.mark.parametrize("suite", ["quick", "full"])
@pytest.mark.parametrize(
    "ctx",
    [Context(llc_bytes=n) for n in CPU_LLCS]
    + [Context(device="cuda:0", backend="cuda", llc_bytes=n) for n in GPU_LLCS],
    ids=[f"cpu-llc{n // MiB}MiB" for n in CPU_LLCS] + [f"gpu-llc{n // MiB}MiB" for n in GPU_LLCS],
)
def test_adamw_sizes_put_one_case_in_the_cache_and_one_in_dram(ctx, suite):
    sizes = _sizes(ctx, suite)
    sets = [n * ADAMW_STATE_BYTES_PER_PARAM for n in sizes]
    assert any(b <= ctx.llc_bytes for b in sets), (sizes, ctx.llc_bytes)
    assert any(b >= 4 * ctx.llc_bytes for b in sets), (sizes, ctx.llc_bytes)
    # the suite's own sizes stay (ids compare with earlier runs); the added ones are on its grid
    base = _sizes(Context(device=ctx.device, backend=ctx.backend), suite)
    assert set(base) <= set(sizes)
    assert all(n in (15_625, 62_500, 250_000) or n % 1_000_000 == 0 for n in sizes)


def test_sizes_where_the_cache_is_unknown_are_the_suites_own():
    assert _sizes(Context()) == [1_000_000, 4_000_000, 16_000_000]
    assert _sizes(Context(llc_bytes=32 * MiB)) == [1_000_000, 4_000_000, 16_000_000]
    assert _sizes(Context(llc_bytes=768 * MiB)) == [1_000_000, 4_000_000, 16_000_000, 256_000_000]
    assert _sizes(Context(llc_bytes=2 * MiB)) == [62_500, 1_000_000, 4_000_000, 16_000_000]
    assert ladder_sizes([], 16, 32 * MiB) == []


def test_residency_labels():
    l3 = CacheLevel(name="L3", bytes=32 * MiB)
    small, mid, big = (residency(n * 16, l3) for n in (1_000_000, 4_000_000, 16_000_000))
    assert (small.kind, mid.kind, big.kind) == (RESIDENT, PARTLY, DRAM)
    assert small.text() == "cache-resident: 15.3 MiB of state in a 32 MiB L3"
    assert mid.text().startswith("partly cache-resident: 61 MiB of state, 1.9x the 32 MiB L3")
    assert big.text() == "DRAM: 244 MiB of state, 7.6x the 32 MiB L3" and big.dram
    assert residency(16 * MiB, None).dram  # no cache known: DRAM, and it says so
    assert "no cache size known" in residency(16 * MiB, None).text()


def _sysfs(tmp_path, caches):
    for i, (level, kind, size, shared) in enumerate(caches):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
        (d / "shared_cpu_list").write_text(f"{shared}\n")
    return tmp_path


def test_cpu_caches_from_sysfs(tmp_path):
    root = _sysfs(
        tmp_path,
        [
            (1, "Data", "32K", "0"),
            (1, "Instruction", "32K", "0"),
            (2, "Unified", "512K", "0"),
            (3, "Unified", "786432K", "0-95"),
        ],
    )
    levels = cpu_cache_levels(root)
    assert [(c.name, c.bytes, c.shared_by) for c in levels] == [
        ("L2", 512 * 1024, "per core"),
        ("L3", 768 * MiB, "shared by CPUs 0-95"),
    ]
    assert last_level(levels).text() == "768 MiB L3"
    assert cpu_cache_levels(tmp_path / "absent") == []


@pytest.fixture
def fake_gpu(monkeypatch):
    """A GPU as torch would describe it: only the properties dsbench reads."""

    def install(l2_bytes: int):
        props = types.SimpleNamespace(L2_cache_size=l2_bytes, name="fake")
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: props)

    return install


def test_gpu_caches_from_device_properties_and_the_profile(fake_gpu):
    fake_gpu(50 * MiB)
    (l2,) = device_cache_levels(True, get_profile("h100-sxm"))
    assert (l2.name, l2.bytes) == ("L2", 50 * MiB) and "L2_cache_size" in l2.source
    fake_gpu(4 * MiB)  # MI300X: torch reports an XCD's L2; the Infinity Cache is the profile's
    llc = last_level(device_cache_levels(True, get_profile("mi300x")))
    assert (llc.name, llc.bytes) == ("Infinity Cache", 256 * MiB)
    assert "profile mi300x" in llc.source


def test_a_profiles_last_level_cache_is_checked(tmp_path):
    body = Path(get_profile("h100-sxm").path).read_text()
    bad = tmp_path / "h100-sxm.toml"
    bad.write_text(
        body.replace("last_level_cache_mib = { value = 50", "last_level_cache_mib = { value = -5")
    )
    with pytest.raises(ProfileError, match="field 'last_level_cache_mib': expected a positive"):
        load_profile_file(bad)


# ------------------------------------------------------------------------- rows and ceilings


def _bench(name: str) -> Benchmark:
    return Benchmark(
        name=name,
        description="planted",
        grid=lambda s, c: {"n": [1]},
        setup=lambda p, c: None,
        metrics=(gbps("bandwidth"),),
    )


def _row(working_set: float, gbps_value: float, name: str = "adamw"):
    """A memory-bound row moving 1 GB a call at ``gbps_value`` GB/s (seconds derived)."""
    seconds = [1.0 / (gbps_value * f) for f in (0.99, 1.0, 1.01) * 4]
    m = Measurement(samples=seconds, summary=summarize(seconds))
    case = Case(fn=lambda: None, work=Work(bytes=1e9, working_set=working_set))
    return runner.ok_row(_bench(name), {"n": 1}, case, m, get_profile("cpu"))


def _ceiling(value: float) -> dict:
    return {
        "mem_bandwidth": ceilings.Ceiling(
            value, 0.98 * value, 1.02 * value, "stream[kernel=axpy]", "measured in this run"
        )
    }


@pytest.mark.parametrize("llc", CPU_LLCS + GPU_LLCS, ids=lambda n: f"llc{n // MiB}MiB")
def test_no_row_fails_for_a_cache_effect(monkeypatch, llc):
    """On every machine: a case inside the cache that beats the DRAM ceiling 3x is labelled, not
    failed; a DRAM case up to 1.5x the ceiling is flagged with why; above it, it fails."""
    monkeypatch.setattr(
        runner, "device_cache_levels", lambda gpu, p: [CacheLevel(name="L3", bytes=llc)]
    )
    resident = _row(llc / 2, 150.0)
    partly = _row(2 * llc, 120.0)
    dram_fast = _row(8 * llc, 60.0)
    dram_wrong = _row(8 * llc, 200.0)
    dram_ok = _row(8 * llc, 40.0)
    rows = ceilings.apply(
        [resident, partly, dram_fast, dram_wrong, dram_ok], _ceiling(50.0), get_profile("cpu")
    )
    assert [r.status for r in rows] == ["ok", "ok", "ok", "failed", "ok"]
    for r, kind in zip(rows[:2], ("resident", "partly"), strict=True):
        assert r.pct_of_peak is None and r.notes.residency["kind"] == kind
        assert r.peak.na.startswith(("cache-resident", "partly cache-resident"))
    assert rows[2].pct_of_peak == pytest.approx(120.0)
    assert "under the 150% that would mean a wrong count" in rows[2].notes.extra["over_ceiling"]
    assert "1.5x above this run's mem_bandwidth ceiling" in rows[3].error
    assert "byte count overstates" in rows[3].error
    assert rows[4].pct_of_peak == pytest.approx(80.0) and "over_ceiling" not in rows[4].notes.extra


def test_the_run_table_labels_resident_rows_and_explains_flagged_ones(monkeypatch):
    from dsbench.measure.run_table import summary_table

    monkeypatch.setattr(
        runner, "device_cache_levels", lambda gpu, p: [CacheLevel(name="L3", bytes=32 * MiB)]
    )
    rows = ceilings.apply(
        [_row(16 * MiB, 150.0), _row(256 * MiB, 55.0)], _ceiling(50.0), get_profile("cpu")
    )
    table = summary_table(rows, limit=100)
    assert "in L3 [1]" in table and "110.0%* [2]" in table
    flat = " ".join(table.split())
    assert (
        "[1] cache-resident: 16 MiB of state in a 32 MiB L3: no share of the DRAM ceiling" in flat
    )
    assert "[2] 110.0% of this run's mem_bandwidth ceiling (stream[kernel=axpy])" in flat
    assert max(len(line) for line in table.splitlines()) <= 100


def test_a_row_whose_interval_reaches_the_ceiling_is_shown_at_it(monkeypatch):
    """51 GB/s (+-1%) against a ceiling of 50 (+-2%): 102% with an interval down past 100%, so
    neither above the ceiling nor flagged; 55 GB/s lies wholly above it and is."""
    from dsbench.measure.run_table import summary_table

    monkeypatch.setattr(
        runner, "device_cache_levels", lambda gpu, p: [CacheLevel(name="L3", bytes=32 * MiB)]
    )
    at, over = ceilings.apply(
        [_row(256 * MiB, 51.0), _row(256 * MiB, 55.0)], _ceiling(50.0), get_profile("cpu")
    )
    assert at.pct_of_peak == pytest.approx(102.0) and at.metrics["bandwidth"].pct_ci99[0] < 100
    assert "over_ceiling" not in at.notes.extra and "at_ceiling" not in over.notes.extra
    assert "over_ceiling" in over.notes.extra and at.status == over.status == "ok"
    table = summary_table([at, over], limit=100)
    assert "~100% [1]" in table and "110.0%* [2]" in table
    flat = " ".join(table.split())
    head = "[1] 102.0% of this run's mem_bandwidth ceiling (stream[kernel=axpy]), 99% interval"
    assert head in flat
    assert "at the ceiling, within the two measurements' spread" in flat


def test_stream_ceilings_count_their_working_set():
    ctx = Context(llc_bytes=32 * MiB)
    work = ceilings.STREAM.work_of({"kernel": "triad"}, ctx)
    assert work.working_set == 3 * 128 * MiB and work.bytes == 3 * 128 * MiB
    assert residency(work.working_set, CacheLevel(name="L3", bytes=32 * MiB)).dram


def test_dsbench_env_reports_the_caches():
    env = {
        "caches": {
            "levels": [
                {"name": "L2", "bytes": 512 * 1024, "shared_by": "per core"},
                {"name": "L3", "bytes": 32 * MiB, "shared_by": "shared by CPUs 0-1"},
            ],
            "last_level": "L3",
            "last_level_bytes": 32 * MiB,
        }
    }
    text = format_env(env)
    assert "L2 ...................... 512 KiB (per core)" in text
    assert "L3 ...................... 32 MiB (shared by CPUs 0-1)" in text
    assert "last level .............. L3 32 MiB (cases under 128 MiB: in cache" in text


def test_a_page_shows_a_share_at_the_ceiling_as_such():
    from dsbench.publish.pages.cells import share_html

    at = str(share_html(102.0, True, "bandwidth", [99.4, 105.0]))
    over = str(share_html(110.0, True, "bandwidth", [105.0, 115.0]))
    assert "~100%" in at and "⚠" not in at and "102.0%" in at  # the estimate, in the tooltip
    assert "110.0% ⚠" in over and "above the measured peak" in over
