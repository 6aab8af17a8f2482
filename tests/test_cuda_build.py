"""The extension build's environment and its lock (:mod:`dsbench.kernels.cuda.build`), on a CPU:
fake toolkits in a temporary folder, torch's ``cpp_extension.load`` replaced by a recorder.

What must hold: the toolkit root is the folder with ``include/cuda_runtime_api.h`` even where
``nvcc`` on PATH is a symlink or a wrapper script; torch's ``CUDA_HOME`` (read once, at its
import) is set to it before the build; on ROCm the visible devices' gfx targets become
``PYTORCH_ROCM_ARCH`` and are part of the build's hash; and the sources are written and loaded
by one process at a time."""

import fcntl
import os
import stat
import threading
import types

import pytest
import torch
from torch.utils import cpp_extension

from dsbench.kernels.cuda import build

ROCM_DEVICES = ("gfx90a:sramecc+:xnack-", "gfx90a:sramecc+:xnack-", "gfx942:sramecc+:xnack-")


def _unset(monkeypatch, *names):
    """Unset ``names`` for this test (and restore them after, also when the code sets them)."""
    for name in names:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def _executable(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _toolkit(root):
    """A CUDA toolkit as far as the build looks: bin/nvcc and the runtime header."""
    _executable(root / "bin" / "nvcc", "#!/bin/sh\nexit 0\n")
    (root / "include").mkdir(parents=True)
    (root / "include" / "cuda_runtime_api.h").write_text("/* fake */\n")
    return root


def _wrapper(folder, target):
    """An ``nvcc`` on PATH that is a shell script exec'ing ``target``."""
    return _executable(folder / "nvcc", f'#!/bin/sh\nexec {target} "$@"\n')


@pytest.fixture
def fake_cuda(monkeypatch, tmp_path):
    """A CUDA build of torch with a GPU; no CUDA_HOME, no toolkit outside ``tmp_path``."""
    monkeypatch.setenv("DSBENCH_CACHE_DIR", str(tmp_path / "cache"))
    _unset(monkeypatch, "DSBENCH_CUDA_REBUILD", "CUDA_HOME", "CUDA_PATH", "TORCH_CUDA_ARCH_LIST")
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.setattr(build, "CUDA_GLOBS", ())
    monkeypatch.setattr(build, "toolkit", lambda: "cuda12.8")
    monkeypatch.setattr(build, "is_rocm", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(build, "_error", None)
    monkeypatch.setattr(build, "_module", None)
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", None)
    return tmp_path.resolve()


@pytest.fixture
def fake_rocm(monkeypatch, tmp_path):
    """A ROCm build of torch seeing three devices of two gfx targets."""
    monkeypatch.setenv("DSBENCH_CACHE_DIR", str(tmp_path / "cache"))
    _unset(monkeypatch, "DSBENCH_CUDA_REBUILD", "PYTORCH_ROCM_ARCH", "ROCM_HOME", "ROCM_PATH")
    monkeypatch.setattr(torch.version, "hip", "6.2.41133")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(ROCM_DEVICES))
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda index: types.SimpleNamespace(gcnArchName=ROCM_DEVICES[index]),
    )
    monkeypatch.setattr(build, "_error", None)
    monkeypatch.setattr(build, "_module", None)


def _sources_ok(src):
    return all((src / n).read_bytes() == (build.CSRC / n).read_bytes() for n in build.SOURCES)


def _lock_is_held(out):
    """Whether someone holds the build lock (a fresh open file: its own flock)."""
    with (out / build.LOCK_FILE).open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


# ------------------------------------------------------------------------------ CUDA_HOME


def test_cuda_home_follows_a_wrapper_script_to_the_toolkit(fake_cuda):
    """torch would take the folder above the wrapper's bin/ (no headers there); the build takes
    the toolkit the wrapper execs."""
    root = _toolkit(fake_cuda / "cuda-13.0")
    _wrapper(fake_cuda / "path", root / "bin" / "nvcc")
    assert build.find_compiler() == (str(fake_cuda / "path" / "nvcc"), "")
    assert build.cuda_home() == (str(root), "")
    assert build.build_environment() == {"CUDA_HOME": str(root)}


def test_cuda_home_follows_a_symlinked_nvcc(fake_cuda):
    root = _toolkit(fake_cuda / "cuda-12.8")
    (fake_cuda / "path").mkdir()
    (fake_cuda / "path" / "nvcc").symlink_to(root / "bin" / "nvcc")
    assert build.cuda_home() == (str(root), "")


def test_cuda_home_prefers_a_valid_cuda_home(fake_cuda, monkeypatch):
    mine = _toolkit(fake_cuda / "mine")
    _wrapper(fake_cuda / "path", _toolkit(fake_cuda / "other") / "bin" / "nvcc")
    monkeypatch.setenv("CUDA_HOME", str(mine))
    assert build.cuda_home() == (str(mine), "")


def test_no_toolkit_root_is_the_reason_it_is_unavailable(fake_cuda):
    """An nvcc without the runtime headers anywhere: unavailable, with a one-line reason."""
    _wrapper(fake_cuda / "path", fake_cuda / "nowhere" / "bin" / "nvcc")
    home, why = build.cuda_home()
    assert home is None and why.startswith("no CUDA toolkit with include/cuda_runtime_api.h")
    assert str(fake_cuda / "nowhere") in why and "\n" not in why
    assert build.toolchain_status("cuda") == (False, why)


@pytest.mark.skipif(not os.path.isdir("/usr/local/cuda-13.0"), reason="no /usr/local/cuda-13.0")
def test_cuda_home_on_this_machine(monkeypatch):
    """Where /usr/local/cuda-13.0 is installed (here behind a wrapper /usr/local/bin/nvcc)."""
    _unset(monkeypatch, "CUDA_HOME", "CUDA_PATH")
    monkeypatch.setattr(build, "is_rocm", lambda: False)
    home, why = build.cuda_home()
    assert home is not None, why
    assert os.path.realpath(home) == os.path.realpath("/usr/local/cuda-13.0")


def test_build_sets_cuda_home_for_torch_before_loading(fake_cuda, monkeypatch):
    """torch computed CUDA_HOME at import (here: none); the build sets it, and the environment,
    to the toolkit root before cpp_extension.load, and the build folder's hash does not move."""
    root = _toolkit(fake_cuda / "cuda-13.0")
    _wrapper(fake_cuda / "path", root / "bin" / "nvcc")
    before = build.build_dir()
    seen = {}

    def load(**kwargs):
        seen.update(
            env=os.environ.get("CUDA_HOME"),
            torch=cpp_extension.CUDA_HOME,
            name=kwargs["name"],
            dir=kwargs["build_directory"],
        )
        return "module"

    monkeypatch.setattr(cpp_extension, "load", load)
    assert build._build() == "module"
    assert seen == {"env": str(root), "torch": str(root), "name": before.name, "dir": str(before)}
    assert build.build_dir() == before


# ------------------------------------------------------------------------------ ROCm


def test_rocm_arch_is_the_visible_gfx_targets(fake_rocm, monkeypatch):
    assert build.rocm_arch() == "gfx90a;gfx942"
    assert build.build_environment() == {"PYTORCH_ROCM_ARCH": "gfx90a;gfx942"}
    detected = build.source_hash()
    monkeypatch.setenv("PYTORCH_ROCM_ARCH", "gfx90a;gfx942")
    assert build.source_hash() == detected  # the hash covers the detected list
    monkeypatch.setenv("PYTORCH_ROCM_ARCH", "gfx90a")
    assert build.rocm_arch() == "gfx90a"  # set by the user: kept
    assert build.source_hash() != detected


def test_rocm_build_sets_the_arch_before_loading(fake_rocm, monkeypatch):
    before = build.build_dir()
    seen = {}

    def load(**kwargs):
        seen.update(arch=os.environ.get("PYTORCH_ROCM_ARCH"), dir=kwargs["build_directory"])

    monkeypatch.setattr(cpp_extension, "load", load)
    build._build()
    assert seen == {"arch": "gfx90a;gfx942", "dir": str(before)}
    assert build.build_dir() == before


# ------------------------------------------------------------------------------ the lock


def test_sources_and_load_are_under_the_build_lock(fake_cuda, monkeypatch):
    """The sources are written, and the module built, while this process holds dsbench.lock."""
    root = _toolkit(fake_cuda / "cuda")
    _wrapper(fake_cuda / "path", root / "bin" / "nvcc")
    out = build.build_dir()
    (out / "src").mkdir(parents=True)
    (out / "src" / build.SOURCES[1]).write_text("half-written by another rank")
    held = []
    write_sources = build._write_sources

    def writing(src):
        held.append(("write", _lock_is_held(out)))
        write_sources(src)

    def load(**kwargs):
        held.append(("load", _lock_is_held(out)))
        assert _sources_ok(out / "src")

    monkeypatch.setattr(build, "_write_sources", writing)
    monkeypatch.setattr(cpp_extension, "load", load)
    build._build()
    assert held == [("write", True), ("load", True)]
    assert not _lock_is_held(out)


def test_concurrent_builds_take_turns(fake_cuda, monkeypatch):
    """Four threads build at once (each opens the lock file itself, so flock separates them as
    it separates ranks): never two inside load, and each finds the sources whole."""
    root = _toolkit(fake_cuda / "cuda")
    _wrapper(fake_cuda / "path", root / "bin" / "nvcc")
    out = build.build_dir()
    threads = 4
    start = threading.Barrier(threads)
    guard = threading.Lock()
    second = threading.Event()  # set when a thread enters load while another is inside
    inside, entries, errors = [0], [], []

    def load(**kwargs):
        with guard:
            inside[0] += 1
            entries.append(inside[0])
            if inside[0] > 1:
                second.set()
        ok = _sources_ok(out / "src")
        second.wait(0.2)  # give a thread that is not kept out the chance to come in
        with guard:
            inside[0] -= 1
        assert ok

    def one():
        start.wait()
        try:
            build._build()
        except Exception as exc:  # surfaced below, with the thread's error
            errors.append(exc)

    monkeypatch.setattr(cpp_extension, "load", load)
    workers = [threading.Thread(target=one) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    assert entries == [1] * threads and not second.is_set()
