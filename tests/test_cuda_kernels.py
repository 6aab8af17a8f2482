"""Hand-written CUDA/HIP kernels (kernels/csrc).

Without a GPU: every .cu compiles on its own for sm_80, sm_90 and gfx90a (also after torch's
hipify pass), with register counts and no spills where none are expected; the sources include no
torch header; failures are clear rows; the registry, build and CLI behave. A missing nvcc/hipcc
FAILS these tests when $CI is set (CI installs both: kernels/csrc/install_hip.sh, as root); on a
machine where it cannot be installed (no root) they skip, saying so.

The numerical checks (on a GPU, and in the CPU emulation) are in
tests/test_cuda_kernels_numerics.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import torch

from dsbench.kernels import registry
from dsbench.kernels.cuda import build, compile_check
from tests._cuda_kernels_helpers import need

CSRC = compile_check.CSRC
FILES = compile_check.kernel_files()
TARGETS = list(compile_check.TARGETS)

# Kernels each file must produce per compiler (template instances differ only in arguments).
EXPECTED = {
    "adamw.cu": {"adamw_update_kernel", "adamw_check_kernel", "adamw_steps_kernel"},
    "reduce.cu": {"reduce_add_vec_kernel", "reduce_add_scalar_kernel"},
    "gemm.cu": {"gemm_tiled_kernel"},
}
MATRIX_KERNEL = {"nvcc": "gemm_wmma_kernel", "hipcc": "gemm_mfma_kernel"}


# ---------------------------------------------------------------------------------------------
# compile checks (no GPU needed)


@pytest.fixture(scope="module")
def compiled() -> list[compile_check.Row]:
    """Every file for every target, compiled once, in parallel, for the whole module."""
    return compile_check.compile_check()


def _rows(compiled, target, file):
    return [r for r in compiled if r.target == target and r.file == file]


def test_kernel_sources_found():
    assert FILES == ["adamw.cu", "gemm.cu", "reduce.cu"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("file", FILES)
def test_kernel_compiles(compiled, target, file):
    """Each .cu compiles alone to an object file; a missing compiler fails with what to run."""
    need(compile_check.TARGETS[target].compiler)
    rows = _rows(compiled, target, file)
    failures = [r.error for r in rows if not r.ok]
    assert rows and not failures, f"{file} on {target}: " + "\n".join(failures)
    assert all(r.registers is not None and r.registers > 0 for r in rows)
    base_names = {r.kernel.split("<")[0] for r in rows}
    expected = EXPECTED[file] | (
        {MATRIX_KERNEL[compile_check.TARGETS[target].compiler]} if file == "gemm.cu" else set()
    )
    assert base_names == expected


@pytest.mark.parametrize("target", TARGETS)
def test_no_spills_where_none_expected(compiled, target):
    """The streaming kernels (reduce, adamw) and every GEMM kernel keep all values in registers;
    the only allowed exception is AMD SGPR spills into VGPR lanes (no memory traffic)."""
    need(compile_check.TARGETS[target].compiler)
    rows = [r for r in compiled if r.target == target and r.ok]
    for r in rows:
        if r.file in ("reduce.cu", "adamw.cu"):
            assert r.spills == 0, r
        else:
            assert r.detail.get("vgpr_spills", 0) == 0 and r.detail.get("scratch_bytes", 0) == 0, r
            if compile_check.TARGETS[target].compiler == "nvcc":
                assert r.spills == 0, r
    reduce_regs = [r.registers for r in rows if r.file == "reduce.cu"]
    assert max(reduce_regs) <= 96  # a vectorized add needs few registers: occupancy stays high


def test_compile_rows_carry_register_and_shared_memory_numbers(compiled):
    need("nvcc", "hipcc")
    wmma = [r for r in compiled if r.target == "sm_90" and r.kernel.startswith("gemm_wmma_kernel")]
    assert len(wmma) == 8  # fp16/bf16 x A row/col x B row/col
    assert all(r.shared_bytes and r.shared_bytes >= 16 * 1024 for r in wmma)
    mfma = [r for r in compiled if r.target == "gfx90a" and r.kernel.startswith("gemm_mfma")]
    assert len(mfma) == 8 and all(r.shared_bytes and "sgprs" in r.detail for r in mfma)


@pytest.mark.parametrize(
    "name", [*FILES, "dsbench_portability.h", "dsbench_kernels.h", "dsbench_cpu_emulation.h"]
)
def test_kernel_sources_include_no_torch_header(name):
    text = (CSRC / name).read_text()
    includes = re.findall(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', text, re.MULTILINE)
    torchy = [i for i in includes if re.match(r"(torch|ATen|c10|pybind11|caffe2)/", i)]
    assert includes and not torchy, f"{name} includes {torchy}"
    assert "bindings.cpp" not in name


def test_only_bindings_include_torch():
    text = (CSRC / "bindings.cpp").read_text()
    assert "#include <torch/extension.h>" in text


def test_compile_error_is_a_clear_row(tmp_path):
    """A broken source gives one failed row per target naming the file, line and error."""
    need("nvcc", "hipcc")
    for header in ("dsbench_portability.h", "dsbench_kernels.h"):
        (tmp_path / header).write_text((CSRC / header).read_text())
    (tmp_path / "broken.cu").write_text(
        '#include "dsbench_portability.h"\n'
        "__global__ void broken_kernel(float* x) { x[0] = no_such_symbol; }\n"
    )
    rows = compile_check.compile_check(["sm_80", "gfx90a"], csrc=tmp_path)
    assert [(r.target, r.file, r.kernel, r.ok) for r in rows] == [
        ("sm_80", "broken.cu", "-", False),
        ("gfx90a", "broken.cu", "-", False),
    ]
    for r in rows:
        assert "broken.cu" in r.error and "no_such_symbol" in r.error and "error" in r.error
    assert "FAILED" in compile_check.format_table(rows)


def test_missing_compiler_says_what_to_install(monkeypatch):
    monkeypatch.setattr(compile_check, "find_compiler", lambda name: None)
    rows = compile_check.compile_check(["gfx90a", "sm_90"], files=["reduce.cu"])
    assert [(r.target, r.ok) for r in rows] == [("sm_90", False), ("gfx90a", False)]
    assert "kernels/csrc/install_hip.sh" in rows[1].error
    assert "CUDA toolkit" in rows[0].error


PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z6kernelPf' for 'sm_90'
ptxas info    : Function properties for _Z6kernelPf
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 8192 bytes smem, 380 bytes cmem[0]
ptxas info    : Function properties for __internal_accurate_pow
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z5otherv' for 'sm_90'
ptxas info    : Function properties for _Z5otherv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
"""

AMD_LOG = """\
k.hip:3:1: remark: Function Name: _Z6kernelPf [-Rpass-analysis=kernel-resource-usage]
__global__ void kernel(float* x) {
^
k.hip:3:1: remark:     SGPRs: 10 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     VGPRs: 22 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     AGPRs: 4 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     ScratchSize [bytes/lane]: 16 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     Occupancy [waves/SIMD]: 8 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     SGPRs Spill: 2 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     VGPRs Spill: 3 [-Rpass-analysis=kernel-resource-usage]
k.hip:3:1: remark:     LDS Size [bytes/block]: 1024 [-Rpass-analysis=kernel-resource-usage]
"""


def test_parse_ptxas_verbose_output():
    usage = compile_check.parse_ptxas(PTXAS_LOG)
    assert set(usage) == {"_Z6kernelPf", "_Z5otherv"}
    k = usage["_Z6kernelPf"]
    assert (k.registers, k.spills, k.shared_bytes, k.detail) == (40, 16, 8192, {"stack_bytes": 8})
    assert (usage["_Z5otherv"].registers, usage["_Z5otherv"].spills) == (8, 0)


def test_parse_amdgpu_resource_remarks():
    k = compile_check.parse_amdgpu_remarks(AMD_LOG)["_Z6kernelPf"]
    assert (k.registers, k.spills, k.shared_bytes) == (22, 5, 1024)
    assert k.detail == {
        "sgprs": 10,
        "agprs": 4,
        "scratch_bytes": 16,
        "occupancy": 8,
        "sgpr_spills": 2,
        "vgpr_spills": 3,
    }


def test_kernel_names_are_demangled_and_shortened():
    mangled = "_ZN12_GLOBAL__N_117gemm_tiled_kernelIfLb1ELb0EEEvNS_4ArgsE"
    demangled = compile_check.demangle([mangled])[mangled]
    assert compile_check.short_kernel_name(demangled) == "gemm_tiled_kernel<float, true, false>"
    assert compile_check.short_kernel_name(
        "void (anonymous namespace)::k<float, (int)2>(Args)"
    ) == ("k<float, (int)2>")


def test_hipify_install_script_is_idempotent_and_shipped():
    script = CSRC / "install_hip.sh"
    text = script.read_text()
    assert text.startswith("#!/bin/sh") and "hipcc libamdhip64-dev rocm-device-libs" in text
    assert "--no-install-recommends" in text and "HIP_PLATFORM=amd" in text
    need("hipcc")  # installed: the script must see that and do nothing (no root needed)
    proc = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nothing to do" in proc.stdout  # the compile checks above already needed hipcc


# ---------------------------------------------------------------------------------------------
# registry, build, CLI (no GPU needed)


def test_import_is_cheap_and_registers_cuda():
    code = (
        "import sys; import dsbench.kernels.cuda\n"
        "from dsbench.kernels import registry\n"
        "assert 'torch.utils.cpp_extension' not in sys.modules\n"
        "assert {registry.get(op, 'cuda').target for op in ('adamw', 'gemm', 'reduce_add')} == {\n"
        "    'dsbench.kernels.cuda.ops:adamw', 'dsbench.kernels.cuda.ops:gemm',\n"
        "    'dsbench.kernels.cuda.ops:reduce_add'}\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU report")
def test_registry_says_compile_checked_only_without_gpu():
    rows = {(r["op"], r["impl"]): r for r in registry.table("cuda")}
    for op in ("adamw", "gemm", "reduce_add"):
        row = rows[(op, "cuda")]
        assert not row["available"]
        assert row["reason"] == "no GPU (compile-checked only: `dsbench kernels --compile-check`)"
    with pytest.raises(build.BuildError, match="no GPU"):
        build.load()


def _fake_gpu(monkeypatch, tmp_path):
    monkeypatch.setenv("DSBENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("DSBENCH_CUDA_REBUILD", raising=False)
    monkeypatch.setattr(build, "toolkit", lambda: "cuda12.8")
    monkeypatch.setattr(build, "is_rocm", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(build, "_error", None)
    monkeypatch.setattr(build, "_module", None)


def test_gpu_without_compiler_is_unavailable_with_reason(monkeypatch, tmp_path):
    _fake_gpu(monkeypatch, tmp_path)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda"))
    ok, why = build.toolchain_status("cuda")
    assert not ok and why.startswith("nvcc not found in $CUDA_HOME/bin")
    assert build.toolchain_status("cpu") == (
        False,
        "runs on GPU tensors only (asked about device cpu)",
    )


def test_build_failure_is_one_line_and_marks_unavailable(monkeypatch, tmp_path):
    """A failing build: one-line BuildError with the first compiler error and the log path,
    then the implementation reports itself unavailable (also to a fresh process)."""
    from torch.utils import cpp_extension

    _fake_gpu(monkeypatch, tmp_path)
    monkeypatch.setattr(build, "find_compiler", lambda: ("/usr/bin/true", ""))
    monkeypatch.setattr(build, "cuda_home", lambda: ("/fake/cuda", ""))
    monkeypatch.setattr(build, "build_environment", lambda: {})
    log = (
        "Error building extension 'dsbench_cuda_x':\n[1/4] nvcc ... gemm.cu\n"
        'FAILED: gemm.cuda.o\ngemm.cu(12): error: identifier "oops" is undefined\n'
        + "noise\n"
        * 200
    )

    def fail(**kwargs):
        assert kwargs["build_directory"].startswith(str(tmp_path / "torch_extensions"))
        assert all(s.startswith(kwargs["build_directory"]) for s in kwargs["sources"])
        raise RuntimeError(log)

    monkeypatch.setattr(cpp_extension, "load", fail)
    with pytest.raises(build.BuildError) as err:
        build.load()
    message = str(err.value)
    assert "\n" not in message and 'gemm.cu(12): error: identifier "oops"' in message
    assert "build.log" in message and err.value.__cause__ is None
    out = build.build_dir()
    assert (out / "build.log").read_text() == log
    assert sorted(p.name for p in (out / "src").iterdir()) == sorted(build.SOURCES + build.HEADERS)
    assert build.toolchain_status("cuda") == (False, message)
    monkeypatch.setattr(build, "_error", None)  # a new process: the marker still says why
    assert build.toolchain_status("cuda") == (False, message)
    monkeypatch.setenv("DSBENCH_CUDA_REBUILD", "1")
    assert build.toolchain_status("cuda") == (True, "")


def _cli(argv):
    from dsbench.cli import _Parser, kernels

    parser = _Parser(prog="dsbench kernels")
    kernels.add_arguments(parser)
    return kernels.run(parser.parse_args(argv))


def test_cli_registry_table(capsys):
    assert _cli(["--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kernel implementations on device cpu")
    assert re.search(r"adamw\s+torch \*\s+yes", out)
    assert re.search(r"gemm\s+cuda\s+no\s+", out)
    assert _cli(["--device", "cpu", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["device"] == "cpu" and {"op", "impl", "available", "reason"} <= set(
        doc["kernels"][0]
    )


def test_cli_compile_check_table_json_and_exit_status(monkeypatch, capsys):
    rows = [
        compile_check.Row(
            target="sm_90", file="reduce.cu", kernel="k<float>", ok=True, registers=12, spills=0,
            shared_bytes=0,
        ),
        compile_check.Row(target="gfx90a", file="gemm.cu", kernel="-", ok=False, error="boom"),
    ]  # fmt: skip
    seen = {}

    def fake(targets=None, files=None, **kw):
        seen["targets"] = targets
        return rows

    monkeypatch.setattr(compile_check, "compile_check", fake)
    assert _cli(["--compile-check", "--target", "sm_90", "--target", "gfx90a"]) == 1
    assert seen["targets"] == ["sm_90", "gfx90a"]
    assert capsys.readouterr().out.splitlines() == [
        "target    file       kernel    ok        regs    spills    smem B  note",
        "--------  ---------  --------  ------  ------  --------  --------  ------",
        "sm_90     reduce.cu  k<float>  ok          12         0         0",
        "gfx90a    gemm.cu    -         FAILED       -         -         -  boom",
    ]
    assert _cli(["--compile-check", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)[0]["registers"] == 12
    monkeypatch.setattr(compile_check, "compile_check", lambda **kw: rows[:1])
    assert _cli(["--compile-check"]) == 0


def test_cli_rejects_unknown_target_and_stray_target():
    from dsbench.errors import UsageError

    with pytest.raises(UsageError, match=r"unknown compile target 'sm_8' \(did you mean 'sm_80'"):
        _cli(["--compile-check", "--target", "sm_8"])
    with pytest.raises(UsageError, match="--target only applies to --compile-check"):
        _cli(["--target", "sm_80"])
