"""Hardware profiles: shipped files, validation messages, detection, peaks, calibration, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import dsbench.cli as cli
from dsbench import hardware
from dsbench.errors import UsageError
from dsbench.hardware import Figure, ProfileError

SHIPPED = {
    "a100-40gb-sxm",
    "a100-80gb-sxm",
    "h100-sxm",
    "h200-sxm",
    "mi250x-gcd",
    "mi250x",
    "mi300x",
    "cpu",
    "generic-gpu",
}
GIB = 2**30


# --------------------------------------------------------------------------------------------
# Shipped profiles
# --------------------------------------------------------------------------------------------


def test_every_shipped_profile_loads_with_a_source_for_every_figure():
    """All files validate, names equal file stems, and no figure lacks a source."""
    profiles = hardware.load_profiles()
    assert set(profiles) == SHIPPED
    for name, profile in profiles.items():
        assert profile.name == name
        assert profile.path == f"hardware_profiles/{name}.toml"
        figures = profile.figures()
        optional = sum(getattr(profile, k) is not None for k in hardware.OPTIONAL_FIGURES)
        assert len(figures) == len(hardware.FIGURES) + len(hardware.PEAK_KEYS) + optional
        for field, fig in figures.items():
            assert fig.source.strip(), f"{name}: {field} has no source"
            assert fig.unit, f"{name}: {field} has no unit"
            assert (fig.value is not None) + (fig.na is not None) + fig.measured == 1


@pytest.mark.parametrize(
    ("profile", "field", "expected"),
    [
        ("h100-sxm", "peak_tflops.fp16_matrix", 989.4),
        ("h100-sxm", "peak_tflops.tf32_matrix", 494.7),
        ("h100-sxm", "link_bandwidth_gbps", 450),
        ("h200-sxm", "memory_bandwidth_gbps", 4800),
        ("h200-sxm", "memory_capacity_gb", 141),
        ("a100-80gb-sxm", "memory_bandwidth_gbps", 2039),
        ("a100-40gb-sxm", "memory_bandwidth_gbps", 1555),
        ("a100-40gb-sxm", "link_bandwidth_gbps", 300),
        ("a100-40gb-sxm", "peak_tflops.fp64", 9.7),
        ("mi250x-gcd", "peak_tflops.bf16_matrix", 191.5),
        ("mi250x-gcd", "warp_size", 64),
        ("mi250x-gcd", "compute_units", 110),
        ("mi250x-gcd", "link_bandwidth_gbps", 200),
        ("mi250x", "peak_tflops.fp64_matrix", 95.7),
        ("mi300x", "peak_tflops.fp16_matrix", 1307.4),
        ("mi300x", "compute_units", 304),
        ("mi300x", "link_bandwidth_gbps", 448),
    ],
)
def test_figures_match_anchors(profile, field, expected):
    """Spot checks against the vendors' datasheets each figure's ``source`` names (dense
    peaks, per-direction link bandwidth)."""
    fig = hardware.get_profile(profile).figures()[field]
    assert fig.value == pytest.approx(expected)


def test_na_and_measured_figures():
    """MI250X has no TF32 and no per-GCD TDP; the generic profiles measure their ceilings."""
    gcd = hardware.get_profile("mi250x-gcd")
    assert gcd.peak_tflops["tf32_matrix"].value is None
    assert "TF32" in gcd.peak_tflops["tf32_matrix"].na
    assert "package" in gcd.tdp_w.na
    cpu = hardware.get_profile("cpu")
    for fig in (cpu.memory_bandwidth_gbps, cpu.link_bandwidth_gbps, cpu.peak_tflops["fp32"]):
        assert fig.measured and fig.value is None
    assert cpu.peak_tflops["bf16_matrix"].measured
    generic = hardware.get_profile("generic-gpu")
    assert generic.peak_tflops["fp16_matrix"].measured
    assert "no datasheet" in generic.peak_tflops["fp64"].na
    assert not hardware.get_profile("mi250x").detect


def test_get_profile_unknown_lists_valid_names():
    with pytest.raises(UsageError, match=r"unknown profile 'h100'.*valid: .*h100-sxm"):
        hardware.get_profile("h100")


def test_to_dict_is_json_and_round_trips():
    profile = hardware.get_profile("mi250x-gcd")
    data = json.loads(json.dumps(profile.to_dict()))
    assert data["peak_tflops"]["tf32_matrix"]["na"]
    assert data["memory_bandwidth_gbps"] == {
        "value": 1638.0,
        "unit": "GB/s",
        "source": profile.memory_bandwidth_gbps.source,
        "na": None,
        "measured": False,
    }
    assert hardware.Profile.from_dict(data) == profile


def test_figure_rejects_empty_and_negative():
    with pytest.raises(ValueError):
        Figure(value=None, source="x")
    with pytest.raises(ValueError):
        Figure(value=-1.0, source="x")


# --------------------------------------------------------------------------------------------
# Validation: one-line messages naming the file and the field
# --------------------------------------------------------------------------------------------

GOOD = (Path(__file__).parents[1] / "hardware_profiles" / "h100-sxm.toml").read_text()


def _replace_line(text: str, start: str, new: str | None) -> str:
    """Replace (or drop, when ``new`` is None) the line starting with ``start``."""
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if line.startswith(start)]
    assert len(hits) == 1, start
    if new is None:
        del lines[hits[0]]
    else:
        lines[hits[0]] = new
    return "\n".join(lines) + "\n"


BAD_FILES = {
    "missing field": (_replace_line(GOOD, "tdp_w =", None), "tdp_w", "missing"),
    "unknown field": (
        _replace_line(GOOD, "detect =", 'detect = true\ncolour = "green"'),
        "colour",
        "unknown field",
    ),
    "wrong type in value": (
        _replace_line(
            GOOD,
            "memory_bandwidth_gbps =",
            'memory_bandwidth_gbps = { value = "fast", source = "x" }',
        ),
        "memory_bandwidth_gbps",
        "expected a number in 'value', got 'fast'",
    ),
    "wrong type": (_replace_line(GOOD, "detect =", 'detect = "yes"'), "detect", "true or false"),
    "negative number": (
        _replace_line(GOOD, "tdp_w =", 'tdp_w = { value = -700, source = "x" }'),
        "tdp_w",
        "positive number",
    ),
    "no value, na or measured": (
        _replace_line(GOOD, "tdp_w =", 'tdp_w = { source = "datasheet" }'),
        "tdp_w",
        "needs one of 'value', 'na'",
    ),
    "value and na": (
        _replace_line(GOOD, "tdp_w =", 'tdp_w = { value = 700, na = "why", source = "x" }'),
        "tdp_w",
        "give only one",
    ),
    "missing source": (
        _replace_line(GOOD, "fp32 =", "fp32 = { value = 66.9 }"),
        "peak_tflops.fp32",
        "'source'",
    ),
    "missing peak": (_replace_line(GOOD, "fp64 =", None), "peak_tflops.fp64", "missing"),
    "unknown peak": (
        _replace_line(
            GOOD, "fp64 =", 'fp64 = { value = 1, source = "x" }\nfp8 = { value = 1, source = "x" }'
        ),
        "peak_tflops.fp8",
        "unknown field",
    ),
    "bad backend": (_replace_line(GOOD, "backend =", 'backend = "metal"'), "backend", "one of"),
    "bad vendor": (_replace_line(GOOD, "vendor =", 'vendor = "intel"'), "vendor", "one of"),
    "bad regex": (
        _replace_line(GOOD, "device_patterns =", "device_patterns = ['H100[']"),
        "device_patterns",
        "bad regex",
    ),
    "name is not the file stem": (
        _replace_line(GOOD, "name =", 'name = "h100"'),
        "name",
        "file name 'h100-sxm'",
    ),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_validation_error_names_file_and_field_in_one_line(tmp_path, case):
    text, field, problem = BAD_FILES[case]
    (tmp_path / "h100-sxm.toml").write_text(text)
    with pytest.raises(ProfileError) as info:
        hardware.load_profiles(tmp_path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{tmp_path.name}/h100-sxm.toml: field '{field}': ")
    assert problem in message
    assert isinstance(info.value, UsageError)  # the CLI turns it into one line and exit 2


def test_good_copy_loads_from_another_folder(tmp_path):
    (tmp_path / "h100-sxm.toml").write_text(GOOD)
    profiles = hardware.load_profiles(tmp_path)
    assert profiles["h100-sxm"].peak_tflops["fp16_matrix"].value == 989.4


def test_invalid_toml_is_one_line(tmp_path):
    (tmp_path / "broken.toml").write_text('name = "broken"\ntitle = \n')
    with pytest.raises(ProfileError, match=r"broken\.toml: not valid TOML") as info:
        hardware.load_profiles(tmp_path)
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------------------------
# Detection
# --------------------------------------------------------------------------------------------


def _info(backend, name, memory_gib=None, arch=None, **extra):
    memory = None if memory_gib is None else int(memory_gib * GIB)
    return {"backend": backend, "name": name, "total_memory_bytes": memory, "arch": arch, **extra}


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (_info("cuda", "NVIDIA A100-SXM4-40GB", 40, "sm_80"), "a100-40gb-sxm"),
        (_info("cuda", "NVIDIA A100-SXM4-80GB", 79.2, "sm_80"), "a100-80gb-sxm"),
        (_info("cuda", "NVIDIA A100-SXM4-80GB"), "a100-80gb-sxm"),  # memory unknown: by name
        (_info("cuda", "NVIDIA A100-SXM4", 39.4), "a100-40gb-sxm"),  # ambiguous name: by memory
        (_info("cuda", "NVIDIA A100-SXM4", 79.2), "a100-80gb-sxm"),
        (_info("cuda", "NVIDIA H100 80GB HBM3", 79.1, "sm_90"), "h100-sxm"),
        (_info("cuda", "NVIDIA H200", 139.8, "sm_90", compute_units=132), "h200-sxm"),
        (_info("rocm", "AMD Instinct MI250X/MI250", 64, "gfx90a"), "mi250x-gcd"),
        (_info("rocm", "AMD Instinct MI250X", 64, "gfx90a:sramecc+:xnack-"), "mi250x-gcd"),
        (_info("rocm", "AMD Instinct MI300X", 192, "gfx942"), "mi300x"),
        (_info("cpu", "AMD EPYC 7763 64-Core Processor", 16, "x86_64"), "cpu"),
        (_info("cpu", None), "cpu"),
    ],
)
def test_detect_known_devices(info, expected):
    detection = hardware.detect(info)
    assert detection.profile.name == expected
    assert detection.message is None
    assert detection.matched_by.startswith(f"backend {info['backend']}")


def test_detect_unknown_gpu_falls_back_with_message():
    detection = hardware.detect(_info("cuda", "NVIDIA GeForce RTX 4090", 24, "sm_89"))
    assert detection.profile.name == "generic-gpu"
    assert detection.matched_by == "fallback"
    assert detection.message == (
        "unknown device 'NVIDIA GeForce RTX 4090' (backend cuda): no hardware profile matches; "
        "using generic-gpu, % of peak uses measured ceilings; add a file to hardware_profiles/"
    )
    # the fallback takes on the real device's backend, vendor and arch
    assert (detection.profile.backend, detection.profile.vendor) == ("cuda", "nvidia")
    assert detection.profile.arch == "sm_89"


@pytest.mark.parametrize(
    ("info", "why"),
    [
        (_info("cuda", "NVIDIA A100-SXM4-80GB", 19.5, "sm_80"), "memory 19.5 GiB"),  # MIG slice
        (_info("rocm", "AMD Instinct MI300X", 24, "gfx942"), "memory 24.0 GiB"),  # CPX partition
        (_info("rocm", "AMD Instinct MI250X/MI250", 64, "gfx90a", compute_units=104), "104"),
        (_info("cuda", "NVIDIA H100 80GB HBM3", 79.1, "sm_80"), "arch sm_80"),
    ],
)
def test_detect_name_match_that_does_not_fit_falls_back_and_says_why(info, why):
    detection = hardware.detect(info)
    assert detection.profile.name == "generic-gpu"
    assert "matches by name but" in detection.message and why in detection.message


def test_detect_backend_must_match():
    """An NVIDIA name reported by a ROCm build is not an NVIDIA profile."""
    assert hardware.detect(_info("rocm", "NVIDIA H200")).profile.name == "generic-gpu"


def test_detect_override_and_bad_backend():
    detection = hardware.detect(_info("cuda", "whatever"), override="h100-sxm")
    assert (detection.profile.name, detection.matched_by) == ("h100-sxm", "override")
    with pytest.raises(UsageError, match="unknown profile"):
        hardware.detect(_info("cuda", "x"), override="nope")
    with pytest.raises(UsageError, match="unknown backend"):
        hardware.detect(_info("metal", "x"))


def test_local_cpu_device_info_detects_cpu():
    info = hardware.local_device_info("cpu")
    assert info["backend"] == "cpu" and info["name"]
    assert hardware.detect(info).profile.name == "cpu"


# --------------------------------------------------------------------------------------------
# peak()
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("mem_bandwidth", 3350),
        ("link_bandwidth", 450),
        ("flops:float16", 989.4),
        ("flops:bfloat16", 989.4),
        ("flops:torch.bfloat16", 989.4),
        ("flops:tf32", 494.7),
        ("flops:float32", 66.9),
        ("flops:float64", 33.5),
        ("flops:fp64_matrix", 66.9),
    ],
)
def test_peak_mapping(kind, expected):
    assert hardware.get_profile("h100-sxm").peak(kind).value == pytest.approx(expected)


def test_peak_units_and_unknown_kind():
    profile = hardware.get_profile("h100-sxm")
    assert profile.peak("flops:float16").unit == "TFLOP/s"
    assert profile.peak("mem_bandwidth").unit == "GB/s"
    with pytest.raises(ValueError, match="unknown peak kind 'flops:int8'"):
        profile.peak("flops:int8")
    with pytest.raises(ValueError):
        profile.peak("bandwidth")


# --------------------------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------------------------


def test_calibrate_measures_then_reuses_cache(tmp_path, monkeypatch):
    cpu = hardware.get_profile("cpu")
    calibrated = hardware.calibrate(cpu, "cpu", cache_dir=tmp_path)
    for field in ("memory_bandwidth_gbps", "link_bandwidth_gbps", "peak_tflops.fp32"):
        fig = calibrated.figures()[field]
        assert fig.measured and fig.value > 0
        assert fig.source.startswith("measured on this machine on ")
    assert calibrated.peak_tflops["bf16_matrix"].value > 0
    # link ceiling = bytes copied per second; memory bandwidth counts read + write (and is the
    # better of copy and in-place add), so it is at least twice the copy rate
    assert (
        calibrated.memory_bandwidth_gbps.value >= 2 * calibrated.link_bandwidth_gbps.value * 0.999
    )
    assert calibrated.peak_tflops["fp16_matrix"].na  # still n/a: never measured on CPU
    assert cpu.memory_bandwidth_gbps.value is None  # the loaded profile is untouched
    assert [p.name for p in tmp_path.iterdir()] == [hardware.CACHE_FILE]  # no temp files left
    cache = json.loads((tmp_path / hardware.CACHE_FILE).read_text())
    assert list(cache["entries"]) == [hardware.calibration_key("cpu")]

    def must_not_measure(device):
        raise AssertionError("measured again despite the cache")

    monkeypatch.setattr(hardware.ceilings, "measure_ceilings", must_not_measure)
    again = hardware.calibrate(cpu, "cpu", cache_dir=tmp_path)
    assert again == calibrated


def test_calibrate_force_remeasures_and_measure_false_reads_only(tmp_path, monkeypatch):
    calls = []

    def fake(device):
        calls.append(device)
        return {
            "memory_bandwidth_gbps": 40.0,
            "copy_bandwidth_gbps": 20.0,
            "matmul_tflops": {"float32": 0.2, "bfloat16": 0.4},
            "methods": {"memory_bandwidth_gbps": "fake copy"},
        }

    monkeypatch.setattr(hardware.ceilings, "measure_ceilings", fake)
    cpu = hardware.get_profile("cpu")
    assert hardware.calibrate(cpu, cache_dir=tmp_path, measure=False) is cpu  # nothing cached
    assert calls == []
    first = hardware.calibrate(cpu, cache_dir=tmp_path)
    assert first.memory_bandwidth_gbps.value == 40.0
    assert "fake copy" in first.memory_bandwidth_gbps.source
    hardware.calibrate(cpu, cache_dir=tmp_path, force=True)
    assert calls == ["cpu", "cpu"]
    assert hardware.calibrate(cpu, cache_dir=tmp_path, measure=False) == first


def test_ceilings_are_the_best_of_every_method_and_size(monkeypatch):
    """The memory ceiling is the best of a read-only sum, a copy and two in-place kernels, the
    matmul ceiling the best over sizes; each method's rate is in the source, with the threads."""
    stream = {"sum": 61.0, "copy": 30.0, "scale": 52.0, "add": 49.0}
    by_size = {512: 0.30, 1024: 0.42, 2048: 0.40}
    monkeypatch.setattr(hardware.ceilings, "_stream_rates", lambda *a, **k: dict(stream))
    monkeypatch.setattr(hardware.ceilings, "_matmul_rates", lambda *a, **k: (dict(by_size), 10))
    got = hardware.measure_ceilings("cpu")
    assert got["memory_bandwidth_gbps"] == 61.0  # the read-only sum beat the in-place kernels
    assert got["copy_bandwidth_gbps"] == 15.0
    assert got["matmul_tflops"] == {"float32": 0.42, "bfloat16": 0.42}
    memory = got["methods"]["memory_bandwidth_gbps"]
    for text in ("Tensor.sum 61.0", "Tensor.copy_ 30.0", "Tensor.mul_ 52.0", "Tensor.add_ 49.0",
                 "ceiling = sum", "torch thread"):  # fmt: skip
        assert text in memory
    matmul = got["methods"]["matmul_bfloat16"]
    assert "n = 512, 1024, 2048" in matmul and "ceiling at n = 1024" in matmul


def test_matmul_calibration_covers_the_gemm_benchmark_sizes():
    """The CPU matmul ceiling is measured at every size the gemm benchmark runs on a CPU, so
    no gemm case can beat it by running at a size the calibration skipped."""
    from dsbench.suites import BENCHMARKS, Context

    gemm = BENCHMARKS["gemm"]
    for suite in gemm.suites:
        sizes = gemm.grid(suite, Context(cpu_flags=("avx512_bf16",)))["size"]
        assert set(sizes) - {128} <= set(hardware.CPU_MATMUL_SIZES), suite  # smoke: 128
    quick = gemm.grid("quick", Context())["size"]
    assert max(quick) <= hardware.CPU_MATMUL_ALWAYS  # measured even on a slow or busy CPU


def test_share_above_100_percent_is_never_bare():
    assert hardware.pct_text(None) == "n/a"
    assert hardware.pct_text(97.24) == "97.2%"
    assert hardware.pct_text(100.0) == "100.0%"
    assert hardware.pct_text(105.54, measured=True) == "105.5% (above the measured peak)"
    assert hardware.pct_text(100.1, measured=False) == "100.1% (above the datasheet peak)"
    assert "dsbench profiles --calibrate" in hardware.over_peak_note(True)


def test_stale_cache_version_is_measured_again(tmp_path, monkeypatch):
    """Ceilings cached by an older calibration method are not reused."""
    old = {"memory_bandwidth_gbps": 1.0, "copy_bandwidth_gbps": 0.5}
    stale = {
        "version": hardware.CACHE_VERSION - 1,
        "entries": {hardware.calibration_key("cpu"): old},
    }
    (tmp_path / hardware.CACHE_FILE).write_text(json.dumps(stale))
    fresh = {"memory_bandwidth_gbps": 50.0, "copy_bandwidth_gbps": 14.0,
             "matmul_tflops": {"float32": 0.4, "bfloat16": 1.5}, "methods": {}}  # fmt: skip
    monkeypatch.setattr(hardware.ceilings, "measure_ceilings", lambda device: dict(fresh))
    profile = hardware.calibrate(hardware.get_profile("cpu"), cache_dir=tmp_path)
    assert profile.memory_bandwidth_gbps.value == 50.0


def test_calibrate_leaves_datasheet_profiles_alone(tmp_path):
    h100 = hardware.get_profile("h100-sxm")
    assert hardware.calibrate(h100, cache_dir=tmp_path) is h100
    assert not list(tmp_path.iterdir())


def test_cache_dir_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv("DSBENCH_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hardware.resolve_cache_dir() == tmp_path / "xdg" / "dsbench"
    monkeypatch.setenv("DSBENCH_CACHE_DIR", str(tmp_path / "own"))
    assert hardware.resolve_cache_dir() == tmp_path / "own"
    assert hardware.resolve_cache_dir(tmp_path / "arg") == tmp_path / "arg"


def test_corrupt_cache_is_remeasured(tmp_path, monkeypatch):
    (tmp_path / hardware.CACHE_FILE).write_text("{not json")
    monkeypatch.setattr(
        hardware.ceilings,
        "measure_ceilings",
        lambda device: {
            "memory_bandwidth_gbps": 10.0,
            "copy_bandwidth_gbps": 5.0,
            "matmul_tflops": {"float32": 0.1, "bfloat16": 0.1},
            "methods": {},
        },
    )
    profile = hardware.calibrate(hardware.get_profile("cpu"), cache_dir=tmp_path)
    assert profile.link_bandwidth_gbps.value == 5.0
    assert (
        json.loads((tmp_path / hardware.CACHE_FILE).read_text())["version"]
        == hardware.CACHE_VERSION
    )


# --------------------------------------------------------------------------------------------
# CLI: dsbench profiles
# --------------------------------------------------------------------------------------------


@pytest.fixture
def dsbench_main(monkeypatch, tmp_path):
    """``dsbench.cli.main`` with only the ``profiles`` verb (other verbs load heavier modules)
    and an empty calibration cache."""
    monkeypatch.setattr(cli, "VERBS", {"profiles": cli.VERBS["profiles"]})
    monkeypatch.setenv("DSBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return cli.main


def test_cli_lists_profiles(dsbench_main, capsys):
    assert dsbench_main(["profiles"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert header[:4] == ["name", "title", "backend", "arch"]
    for name in SHIPPED:
        assert f"\n{name} " in out
    row = next(line for line in out.splitlines() if line.startswith("h100-sxm "))
    assert row.split()[-5:] == ["80", "3350", "989.4", "989.4", "450"]
    assert "measured" in next(line for line in out.splitlines() if line.startswith("cpu "))


def test_cli_shows_one_profile_with_sources(dsbench_main, capsys):
    assert dsbench_main(["profiles", "h100-sxm"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("h100-sxm: NVIDIA H100 SXM5 80GB")
    assert "989.4" in out and "whitepaper" in out
    assert "peak_tflops.tf32_matrix" in out


def test_cli_shows_na_reason(dsbench_main, capsys):
    assert dsbench_main(["profiles", "mi250x-gcd"]) == 0
    out = capsys.readouterr().out
    assert "n/a" in out and "no TF32" in out


def test_cli_json(dsbench_main, capsys):
    assert dsbench_main(["profiles", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {p["name"] for p in listed} == SHIPPED
    assert dsbench_main(["profiles", "mi300x", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["peak_tflops"]["bf16_matrix"]["value"] == 1307.4


def test_cli_unknown_profile_exits_2_with_one_line(dsbench_main, capsys):
    assert dsbench_main(["profiles", "nope"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("dsbench: error: unknown profile 'nope'")
    assert all(name in lines[0] for name in SHIPPED)


def test_cli_calibrate_only_for_cpu(dsbench_main, capsys):
    assert dsbench_main(["profiles", "h100-sxm", "--calibrate"]) == 2
    assert "--calibrate" in capsys.readouterr().err


def test_cli_calibrate_cpu(dsbench_main, capsys, monkeypatch):
    monkeypatch.setattr(
        hardware.ceilings,
        "measure_ceilings",
        lambda device: {
            "memory_bandwidth_gbps": 12.5,
            "copy_bandwidth_gbps": 6.25,
            "matmul_tflops": {"float32": 0.125, "bfloat16": 0.25},
            "methods": {},
        },
    )
    assert dsbench_main(["profiles", "--calibrate"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cpu: ") and "12.5" in out and "measured on this machine" in out
    # a later plain listing shows the cached measurement without measuring again
    monkeypatch.setattr(
        hardware.ceilings, "measure_ceilings", lambda device: pytest.fail("measured")
    )
    assert dsbench_main(["profiles"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("cpu "))
    assert "12.5" in row
