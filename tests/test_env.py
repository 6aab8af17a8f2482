"""``dsbench env`` and :mod:`dsbench.envinfo`: CPU collection, parsers on captured tool output."""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from dsbench.cli import env as env_cli
from dsbench.envinfo import (
    collect,
    collect_env,
    format_env,
    git_commit,
    parse_cpuinfo,
    parse_driver_file,
    parse_hipcc_version,
    parse_nccl_version,
    parse_nvcc_version,
    parse_nvidia_smi,
    parse_rocm_smi,
    summary_fields,
)
from dsbench.errors import UsageError

SUMMARY_KEYS = {
    "python",
    "torch",
    "triton",
    "numpy",
    "deepspeed",
    "dsbench",
    "commit",
    "backend",
    "profile",
    "device",
    "device_count",
    "cpu",
    "threads",
    "cuda",
    "hip",
    "nccl",
    "driver",
    "machine",
    "os",
}

# --- captured tool output ---------------------------------------------------------------------

NVIDIA_SMI_H100 = """\
0, NVIDIA H100 80GB HBM3, 550.54.15, 1980, 2619, 1980, 2619, 700.00, 34
1, NVIDIA H100 80GB HBM3, 550.54.15, 345, 2619, 1980, 2619, 700.00, 31
"""

# GH200 under MIG: current clocks and power limit are not reported.
NVIDIA_SMI_NA = """\
0, NVIDIA GH200 480GB, 560.35.03, [N/A], [N/A], 1980, 2619, [N/A], 29
1, NVIDIA GH200 480GB, 560.35.03, 1755, 2619, 1980, 2619, [Not Supported], [N/A]
"""

# ROCm 5.7 on MI250X (two GCDs), keys with trailing colons, driver under "system".
ROCM_SMI_MI250X = """\
{"card0": {"Card series": "AMD INSTINCT MI250X", "Card model": "0x740c", \
"Card vendor": "Advanced Micro Devices, Inc. [AMD/ATI]", "Card SKU": "D65209", \
"dcefclk clock speed:": "(357Mhz)", "dcefclk clock level:": "0", \
"fclk clock speed:": "(1200Mhz)", "fclk clock level:": "0", \
"mclk clock speed:": "(1600Mhz)", "mclk clock level:": "3", \
"sclk clock speed:": "(800Mhz)", "sclk clock level:": "1", \
"socclk clock speed:": "(1090Mhz)", "socclk clock level:": "3", \
"pcie clock level": "1 (16.0GT/s x16)", \
"Temperature (Sensor edge) (C)": "35.0", "Temperature (Sensor junction) (C)": "38.0", \
"Temperature (Sensor memory) (C)": "44.0", \
"Average Graphics Package Power (W)": "92.0", "Max Graphics Package Power (W)": "560.0"}, \
"card1": {"Card series": "AMD INSTINCT MI250X", "Card model": "0x740c", \
"mclk clock speed:": "(1600Mhz)", "sclk clock speed:": "(1700Mhz)", \
"Temperature (Sensor edge) (C)": "N/A", "Temperature (Sensor junction) (C)": "41.0", \
"Average Graphics Package Power (W)": "N/A", "Max Graphics Package Power (W)": "N/A"}, \
"system": {"Driver version": "6.2.4"}}
"""

# ROCm 6.2 on MI300X: a warning line before the JSON, capitalised keys, driver per card.
ROCM_SMI_MI300X = """\
WARNING: AMD GPU device(s) is/are in a low-power state. Check power control/runtime_status

{"card0": {"Card Series": "AMD Instinct MI300X OAM", "Card Model": "0x74a1", \
"Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]", "Card SKU": "M3000100", \
"GFX Version": "gfx942", "Driver version": "6.8.5", \
"fclk clock speed:": "(1500Mhz)", "mclk clock speed:": "(900Mhz)", \
"sclk clock level:": "0 (132Mhz)", "socclk clock speed:": "(28Mhz)", \
"Temperature (Sensor edge) (C)": "N/A", "Temperature (Sensor junction) (C)": "42.0", \
"Temperature (Sensor memory) (C)": "33.0", \
"Current Socket Graphics Package Power (W)": "141.0", "Max Graphics Package Power (W)": "750.0"}}
"""

NVCC_13 = """\
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""

HIPCC_62 = """\
HIP version: 6.2.41133-dd7f95766
AMD clang version 18.0.0git (https://github.com/RadeonOpenCompute/llvm-project roc-6.2.0 24292 \
26466ce804ac523b398608f17388eb6d605a3f09)
Target: x86_64-unknown-linux-gnu
Thread model: posix
InstalledDir: /opt/rocm-6.2.0/lib/llvm/bin
"""

CPUINFO_SPR = """\
processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu vme sse sse2 avx avx2 fma avx512f avx512dq avx512_bf16 avx512_fp16 amx_bf16 \
amx_tile amx_int8

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
"""

CPUINFO_GRACE = """\
processor\t: 0
BogoMIPS\t: 2000.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid sve bf16 i8mm
CPU implementer\t: 0x41
CPU part\t: 0xd4f
"""


# --- parsers ----------------------------------------------------------------------------------


def test_parse_nvidia_smi():
    rows = parse_nvidia_smi(NVIDIA_SMI_H100)
    assert [r["index"] for r in rows] == [0, 1]
    assert rows[1] == {
        "index": 1,
        "name": "NVIDIA H100 80GB HBM3",
        "driver_version": "550.54.15",
        "clocks_sm_mhz": 345,
        "clocks_mem_mhz": 2619,
        "clocks_max_sm_mhz": 1980,
        "clocks_max_mem_mhz": 2619,
        "power_limit_w": 700.0,
        "temperature_c": 31,
        "source": "nvidia-smi",
    }


def test_parse_nvidia_smi_not_available_values_are_none():
    first, second = parse_nvidia_smi(NVIDIA_SMI_NA)
    assert first["clocks_sm_mhz"] is None and first["clocks_mem_mhz"] is None
    assert first["power_limit_w"] is None and first["temperature_c"] == 29
    assert first["clocks_max_sm_mhz"] == 1980
    assert second["power_limit_w"] is None and second["temperature_c"] is None


def test_parse_nvidia_smi_ignores_noise_and_rejoins_comma_in_name():
    text = "No devices were found\n\n0, Odd, GPU, 1.0, 1, 2, 3, 4, 5.5, 6\n"
    (row,) = parse_nvidia_smi(text)
    assert row["name"] == "Odd, GPU" and row["driver_version"] == "1.0"
    assert row["power_limit_w"] == 5.5 and row["temperature_c"] == 6
    assert parse_nvidia_smi("") == []


def test_parse_rocm_smi_mi250x():
    card0, card1 = parse_rocm_smi(ROCM_SMI_MI250X)
    assert card0 == {
        "index": 0,
        "name": "AMD INSTINCT MI250X",
        "driver_version": "6.2.4",
        "clocks_sm_mhz": 800,
        "clocks_mem_mhz": 1600,
        "clocks_max_sm_mhz": None,
        "clocks_max_mem_mhz": None,
        "power_limit_w": 560.0,
        "temperature_c": 35,
        "source": "rocm-smi",
    }
    assert card1["clocks_sm_mhz"] == 1700
    assert card1["temperature_c"] == 41  # edge is N/A: fall back to junction
    assert card1["power_limit_w"] is None


def test_parse_rocm_smi_mi300x_with_warning_prefix():
    (card,) = parse_rocm_smi(ROCM_SMI_MI300X)
    assert card["name"] == "AMD Instinct MI300X OAM"
    assert card["driver_version"] == "6.8.5"
    assert card["clocks_sm_mhz"] == 132 and card["clocks_mem_mhz"] == 900
    assert card["power_limit_w"] == 750.0 and card["temperature_c"] == 42


def test_parse_rocm_smi_garbage():
    assert parse_rocm_smi("") == []
    assert parse_rocm_smi("ERROR: GPU[0] : Unable to read") == []
    assert parse_rocm_smi("{not json") == []


def test_parse_compiler_versions():
    assert parse_nvcc_version(NVCC_13) == "13.0"
    assert parse_nvcc_version("Cuda compilation tools, release 12.4, V12.4.131") == "12.4"
    assert parse_hipcc_version(HIPCC_62) == "6.2.41133-dd7f95766"
    assert parse_nvcc_version("garbage") is None and parse_hipcc_version("") is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ((2, 21, 5), "2.21.5"),
        ([2, 27, 3], "2.27.3"),
        (21805, "2.18.5"),
        (2708, "2.7.8"),
        (None, None),
    ],
)
def test_parse_nccl_version(raw, expected):
    assert parse_nccl_version(raw) == expected


def test_parse_cpuinfo():
    assert parse_cpuinfo(CPUINFO_SPR) == (
        "Intel(R) Xeon(R) Platinum 8480+",
        ["avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile"],
    )
    assert parse_cpuinfo(CPUINFO_GRACE) == ("ARM Neoverse-V2", ["asimd", "sve", "bf16"])
    unknown_arm = CPUINFO_GRACE.replace("0xd4f", "0x123")
    assert parse_cpuinfo(unknown_arm) == (None, ["asimd", "sve", "bf16"])


def test_parse_driver_file():
    nv = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
    assert parse_driver_file(nv) == "550.54.15"
    nv_open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n"
    assert parse_driver_file(nv_open) == "570.86.15"
    assert parse_driver_file("6.7.0\n") == "6.7.0"  # /sys/module/amdgpu/version
    assert parse_driver_file("") is None


# --- probes with a fake torch -----------------------------------------------------------------


def _fake_torch(hip: str | None, props: list) -> SimpleNamespace:
    cuda = SimpleNamespace(
        is_available=lambda: bool(props),
        device_count=lambda: len(props),
        get_device_properties=lambda i: props[i],
    )
    version = SimpleNamespace(hip=hip, cuda=None if hip else "12.8")
    return SimpleNamespace(cuda=cuda, version=version, __version__="2.11.0")


def test_gpu_devices_cuda_and_rocm_arch():
    h100 = SimpleNamespace(
        name="NVIDIA H100 80GB HBM3",
        total_memory=85 * 2**30,
        major=9,
        minor=0,
        multi_processor_count=132,
        L2_cache_size=50 * 2**20,
    )
    (dev,) = collect._gpu_devices(_fake_torch(None, [h100]))
    assert dev["arch"] == "sm_90" and dev["multi_processor_count"] == 132
    assert dev["l2_cache_bytes"] == 50 * 2**20
    # Older torch without L2_cache_size; ROCm arch trimmed of its feature flags.
    mi250 = SimpleNamespace(
        name="AMD Instinct MI250X",
        total_memory=64 * 2**30,
        major=9,
        minor=0,
        gcnArchName="gfx90a:sramecc+:xnack-",
        multi_processor_count=110,
    )
    (dev,) = collect._gpu_devices(_fake_torch("6.2.41133", [mi250]))
    assert dev["arch"] == "gfx90a" and dev["l2_cache_bytes"] is None


def test_resolve_device():
    assert collect._resolve_device("cpu", _fake_torch(None, [])) == "cpu"
    assert collect._resolve_device(None, _fake_torch(None, [])) == "cpu"
    gpu = SimpleNamespace(name="x", total_memory=1, major=8, minor=0)
    assert collect._resolve_device("cuda:1", _fake_torch(None, [gpu])) == "cuda"
    with pytest.raises(UsageError, match="requested but no GPU"):
        collect._resolve_device("cuda", _fake_torch("6.2", []))
    with pytest.raises(UsageError, match="unknown device 'tpu'"):
        collect._resolve_device("tpu", _fake_torch(None, []))


def test_collect_env_rocm_path_with_faked_gpu(monkeypatch):
    """The GPU branch end to end on a CPU machine: torch.cuda faked as one MI300X under ROCm."""
    mi300 = SimpleNamespace(
        name="AMD Instinct MI300X",
        total_memory=192 * 2**30,
        major=9,
        minor=4,
        gcnArchName="gfx942:sramecc+:xnack-",
        multi_processor_count=304,
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: mi300)
    monkeypatch.setattr(torch.version, "hip", "6.2.41133-dd7f95766")
    monkeypatch.setattr(collect, "_tool", lambda *a: None)  # no rocm-smi, no compilers
    monkeypatch.setattr(collect, "_driver_fallback", lambda backend: "6.8.5")
    env = collect_env()
    assert env["backend"] == "rocm" and env["device_count"] == 1
    assert env["devices"][0]["arch"] == "gfx942"
    assert env["gpu_telemetry"] == [] and env["telemetry_note"] == "rocm-smi not found"
    assert env["driver"] == "6.8.5" and env["compilers"] == {"nvcc": None, "hipcc": None}
    assert {row["impl"] for row in env["kernels"]} >= {"torch"}
    fields = summary_fields(env)
    assert fields["hip"] == "6.2.41133-dd7f95766" and fields["device"] == "AMD Instinct MI300X"
    assert "Kernel implementations (device cuda)" in format_env(env)


def test_profile_uses_hardware_detect(monkeypatch):
    monkeypatch.delenv("DSBENCH_PROFILE", raising=False)
    h100 = {
        "name": "NVIDIA H100 80GB HBM3",
        "total_memory_bytes": 85_045_198_848,
        "arch": "sm_90",
        "multi_processor_count": 132,
        "index": 0,
    }
    got = collect._profile("cuda", h100)
    assert got["name"] == "h100-sxm" and got["message"] is None and got["matched_by"]
    unknown = collect._profile("cuda", {"name": "NVIDIA GeForce RTX 4090", "arch": "sm_89"})
    assert unknown["name"] == "generic-gpu" and "RTX 4090" in unknown["message"]
    # a MIG slice or a cut-down part has fewer compute units: not the datasheet device
    assert collect._profile("cuda", h100 | {"multi_processor_count": 16})["name"] == "generic-gpu"
    monkeypatch.setenv("DSBENCH_PROFILE", "a100-80gb-sxm")
    assert collect._profile("cuda", h100)["name"] == "a100-80gb-sxm"
    monkeypatch.setitem(sys.modules, "dsbench.hardware", SimpleNamespace())  # broken install
    broken = collect._profile("cpu", h100)
    assert broken["name"] is None
    assert broken["message"].startswith("hardware profiles unavailable: ")


def test_telemetry_notes(monkeypatch):
    assert collect._telemetry("cpu") == ([], "no GPU in use (backend cpu)")
    monkeypatch.setattr(collect, "_tool", lambda *a: None)
    assert collect._telemetry("cuda") == ([], "nvidia-smi not found")
    assert collect._telemetry("rocm") == ([], "rocm-smi not found")


def test_run_timeout_is_reported(monkeypatch):
    monkeypatch.setattr(collect, "TOOL_TIMEOUT_S", 0.2)
    out, why = collect._run([sys.executable, "-c", "import time; time.sleep(10)"])
    assert out is None and "timed out after 0.2 s" in why
    out, why = collect._run(["dsbench-no-such-tool-xyz", "--version"])
    assert out is None and why == "dsbench-no-such-tool-xyz not found"


# --- collect_env / summary_fields / format_env ------------------------------------------------


@pytest.fixture(scope="module")
def cpu_env() -> dict:
    return collect_env("cpu")


def test_collect_env_cpu(cpu_env):
    env = cpu_env
    assert env["backend"] == "cpu"
    assert env["python"]["version"].split(".")[:3] == [str(v) for v in sys.version_info[:3]]
    assert env["packages"]["torch"] == torch.__version__
    assert env["device_count"] == 1 and len(env["devices"]) == 1
    assert env["devices"][0]["arch"] == platform.machine()
    assert env["gpu_telemetry"] == [] and "no GPU" in env["telemetry_note"]
    assert env["cpu"]["torch_threads"] == torch.get_num_threads()
    assert env["driver"] is None
    assert set(env["compilers"]) == {"nvcc", "hipcc"}
    assert {"name", "message"} <= set(env["profile"])
    assert env["kernels"] and {"op", "impl", "available", "reason"} <= set(env["kernels"][0])
    assert env["collected_at"].endswith("+00:00")
    assert json.loads(json.dumps(env)) == env


def test_collect_env_without_telemetry():
    env = collect_env("cpu", telemetry=False)
    assert env["gpu_telemetry"] == [] and env["telemetry_note"] == "telemetry disabled"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_collect_env_cuda_without_gpu_is_a_usage_error():
    with pytest.raises(UsageError):
        collect_env("cuda")


def test_summary_fields_cpu(cpu_env):
    fields = summary_fields(cpu_env)
    assert set(fields) >= SUMMARY_KEYS
    assert all(v is None or isinstance(v, str) for v in fields.values())
    assert fields["python"] == platform.python_version()
    assert fields["torch"] == torch.__version__
    assert fields["backend"] == "cpu" and fields["device_count"] == "1"
    assert fields["threads"] == str(torch.get_num_threads())
    assert fields["device"] == cpu_env["cpu"]["model"]
    assert fields["hip"] is None and fields["driver"] is None


def test_summary_fields_tolerates_partial_env():
    fields = summary_fields({"python": {"version": "3.11.7"}, "devices": []})
    assert fields["python"] == "3.11.7" and fields["device"] is None and fields["torch"] is None
    assert set(summary_fields({})) >= SUMMARY_KEYS


def _gpu_env() -> dict:
    """A hand-built two-H100 env, to cover the GPU paths of the report without a GPU."""
    h100 = {
        "name": "NVIDIA H100 80GB HBM3",
        "total_memory_bytes": 85520809984,
        "arch": "sm_90",
        "multi_processor_count": 132,
        "l2_cache_bytes": 52428800,
    }
    return {
        "dsbench": {
            "version": "0.1.0",
            "commit": "0123456789abcdef" * 2 + "01234567",
            "dirty": True,
        },
        "python": {"version": "3.11.7", "implementation": "CPython", "executable": "/x/python"},
        "platform": {
            "system": "Linux",
            "release": "5.15",
            "machine": "x86_64",
            "hostname": "node01",
            "os": "Ubuntu 22.04.4 LTS",
        },
        "packages": {
            "torch": "2.11.0+cu128",
            "triton": "3.5.0",
            "numpy": "2.1.0",
            "deepspeed": None,
            "pandas": "2.2.3",
            "scipy": "1.14.1",
        },
        "backend": "cuda",
        "runtime": {
            "cuda": "12.8",
            "hip": None,
            "nccl": "2.26.2",
            "cudnn": 91002,
            "torch_git": "abc",
            "float32_matmul_precision": "highest",
        },
        "devices": [{"index": 0, **h100}, {"index": 1, **h100}],
        "device_count": 2,
        "gpu_telemetry": parse_nvidia_smi(NVIDIA_SMI_H100),
        "driver": "550.54.15",
        "cpu": {
            "model": "Intel(R) Xeon(R) Platinum 8480+",
            "logical_cpus": 224,
            "affinity_cpus": 224,
            "torch_threads": 112,
            "llc_bytes": 105 * 2**20,
            "flags": ["avx2", "amx_bf16"],
        },
        "memory": {"total_bytes": 2 * 2**40},
        "compilers": {
            "nvcc": {"path": "/usr/local/cuda/bin/nvcc", "version": "12.8"},
            "hipcc": None,
        },
        "profile": {
            "name": None,
            "title": None,
            "matched_by": None,
            "message": "no profile for 'NVIDIA H100 80GB HBM3' (sm_90)",
        },
        "kernels": [
            {"op": "gemm", "impl": "torch", "available": True, "reason": ""},
            {"op": "adamw", "impl": "triton", "available": False, "reason": "triton not installed"},
        ],
        "env_vars": {"CUDA_VISIBLE_DEVICES": "0,1"},
        "collected_at": "2025-01-01T00:00:00+00:00",
    }


def test_summary_fields_gpu():
    fields = summary_fields(_gpu_env())
    assert fields["device"] == "NVIDIA H100 80GB HBM3" and fields["device_count"] == "2"
    assert fields["cuda"] == "12.8" and fields["nccl"] == "2.26.2"
    assert fields["driver"] == "550.54.15" and fields["machine"] == "node01"
    assert fields["commit"].startswith("0123456789abcdef") and fields["dirty"] == "yes"
    assert fields["deepspeed"] is None and fields["profile"] is None


def test_format_env_gpu_sections():
    text = format_env(_gpu_env())
    for section in (
        "Versions",
        "Backend & devices",
        "GPU telemetry",
        "CPU",
        "Compilers",
        "Hardware profile",
        "Kernel implementations (device cuda)",
    ):
        assert f"\n{section}\n" in text
    assert "(git 0123456789ab, dirty)" in text
    assert "[1] NVIDIA H100 80GB HBM3 (79.6 GiB, sm_90, 132 SMs/CUs, L2 50 MiB)" in text
    assert "source: nvidia-smi" in text and "550.54.15" in text
    assert "no profile for 'NVIDIA H100 80GB HBM3'" in text
    assert "deepspeed" in text and "not installed" in text
    assert "CUDA_VISIBLE_DEVICES=0,1" in text
    kernel_rows = [line.split() for line in text.splitlines() if line.startswith("  adamw")]
    assert kernel_rows == [["adamw", "triton", "no", "triton", "not", "installed"]]


def test_format_env_cpu(cpu_env):
    text = format_env(cpu_env)
    assert "backend ....." in text and "none: no GPU in use (backend cpu)" in text
    assert "Kernel implementations (device cpu)" in text
    assert f"torch {'.' * 3}" in text and torch.__version__ in text


# --- git --------------------------------------------------------------------------------------

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


def _git(cwd, *args):
    config = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", *config, *args], cwd=cwd, check=True, capture_output=True)


@needs_git
def test_git_commit_on_repo(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "a.py").write_text("x = 1\n")
    (repo / ".gitignore").write_text("venv/\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "init")
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert git_commit(repo / "pkg") == (head, False)
    (repo / "results.json").write_text("{}")  # untracked output does not make the code dirty
    assert git_commit(repo / "pkg") == (head, False)
    (repo / "pkg" / "a.py").write_text("x = 2\n")
    assert git_commit(repo / "pkg") == (head, True)
    ignored = repo / "venv" / "site-packages" / "dsbench"  # an install inside someone's checkout
    ignored.mkdir(parents=True)
    assert git_commit(ignored) == (None, None)


@needs_git
def test_git_commit_on_non_repo(tmp_path):
    assert git_commit(tmp_path) == (None, None)
    assert git_commit(tmp_path / "missing" / "dir") == (None, None)


def test_git_commit_without_git(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert git_commit() == (None, None)


# --- CLI --------------------------------------------------------------------------------------


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    env_cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_cli_text(capsys):
    assert env_cli.run(_args("--device", "cpu", "--no-telemetry")) == 0
    out = capsys.readouterr().out
    assert out.startswith("dsbench environment report") and "Kernel implementations" in out


def test_cli_json(capsys):
    assert env_cli.run(_args("--json", "--device", "cpu")) == 0
    env = json.loads(capsys.readouterr().out)
    assert env["backend"] == "cpu" and env["packages"]["torch"] == torch.__version__


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_cli_cuda_without_gpu_is_a_usage_error():
    with pytest.raises(UsageError):
        env_cli.run(_args("--device", "cuda"))


def test_main_env_json(capsys):
    from dsbench import cli

    for verb in cli.VERBS:  # every verb's module imports (the parser needs them all)
        importlib.import_module(f"dsbench.cli.{verb.replace('-', '_')}")
    assert cli.main(["env", "--json", "--device", "cpu"]) == 0
    assert json.loads(capsys.readouterr().out)["backend"] == "cpu"
    if not torch.cuda.is_available():
        assert cli.main(["env", "--device", "cuda"]) == 2
        assert "requested but no GPU" in capsys.readouterr().err
