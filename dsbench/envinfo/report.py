"""The text ``dsbench env`` prints: ds_report-style sections, tables for telemetry and kernels."""

from __future__ import annotations

from dsbench.hardware.caches import DRAM_FACTOR, size_text
from dsbench.records import fingerprint


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**30:.1f} GiB"


def _line(key: str, value, width: int = 24) -> str:
    return f"  {key} {'.' * max(2, width - len(key))} {'-' if value in (None, '') else value}"


def _section(title: str) -> list[str]:
    return ["", title, "-" * len(title)]


def format_env(env: dict) -> str:
    """The ``dsbench env`` report: ds_report-style sections, tables for telemetry and kernels."""
    lines = ["dsbench environment report", "=" * 26, f"collected {env.get('collected_at')}"]
    for section in (
        _versions,
        _backend_and_devices,
        _gpu_telemetry,
        _cpu,
        _caches,
        _compilers,
        _hardware_profile,
        _env_vars,
        _kernel_table,
    ):
        lines += section(env)
    return "\n".join(lines) + "\n"


def _table(rows: list[list], headers: list[str], **kwargs) -> list[str]:
    """A ``tabulate`` table, indented two spaces."""
    from tabulate import tabulate

    table = tabulate(rows, headers=headers, tablefmt="simple", **kwargs)
    return ["  " + row for row in table.splitlines()]


def _versions(env: dict) -> list[str]:
    pkgs, ds, py = env.get("packages", {}), env.get("dsbench", {}), env.get("python", {})
    commit = ds.get("commit")
    rev = f" (git {commit[:12]}{', dirty' if ds.get('dirty') else ''})" if commit else ""
    lines = _section("Versions")
    lines.append(_line("dsbench", f"{ds.get('version')}{rev}"))
    lines.append(
        _line("python", f"{py.get('version')} ({py.get('implementation')}) {py.get('executable')}")
    )
    for name in ("torch", "triton", "numpy", "deepspeed", "pandas", "scipy"):
        lines.append(_line(name, pkgs.get(name) or "not installed"))
    plat = env.get("platform", {})
    lines.append(
        _line("os", f"{plat.get('os')} (kernel {plat.get('release')}, {plat.get('machine')})")
    )
    lines.append(_line("host", plat.get("hostname")))
    hw = fingerprint.from_env(env)
    lines.append(_line("hardware", f"{hw.name} (fingerprint {hw.id})"))
    return lines


_RUNTIME_LABELS = {
    "cuda": "cuda",
    "hip": "hip",
    "nccl": "nccl/rccl",
    "cudnn": "cudnn/miopen",
    "torch_git": "torch git",
    "float32_matmul_precision": "fp32 matmul precision",
}


def _backend_and_devices(env: dict) -> list[str]:
    rt = env.get("runtime", {})
    lines = _section("Backend & devices")
    lines.append(_line("backend", env.get("backend")))
    for key, label in _RUNTIME_LABELS.items():
        lines.append(_line(label, rt.get(key)))
    lines.append(_line("driver", env.get("driver")))
    lines.append(_line("devices", env.get("device_count")))
    for d in env.get("devices", []):
        extra = [f"{d['multi_processor_count']} SMs/CUs"] if d.get("multi_processor_count") else []
        if d.get("l2_cache_bytes"):
            extra.append(f"L2 {d['l2_cache_bytes'] / 2**20:.0f} MiB")
        details = ", ".join([_gib(d.get("total_memory_bytes")), str(d.get("arch")), *extra])
        lines.append(f"  [{d.get('index')}] {d.get('name')} ({details})")
    return lines


_TELEMETRY_COLUMNS = {
    "index": "gpu",
    "name": "name",
    "clocks_sm_mhz": "sm MHz",
    "clocks_max_sm_mhz": "max sm",
    "clocks_mem_mhz": "mem MHz",
    "clocks_max_mem_mhz": "max mem",
    "power_limit_w": "power limit W",
    "temperature_c": "temp C",
}


def _gpu_telemetry(env: dict) -> list[str]:
    lines = _section("GPU telemetry")
    telemetry = env.get("gpu_telemetry") or []
    if not telemetry:
        return [*lines, f"  none: {env.get('telemetry_note', 'not collected')}"]
    lines.append(f"  source: {telemetry[0].get('source')} (read-only query)")
    rows = [[t.get(key) for key in _TELEMETRY_COLUMNS] for t in telemetry]
    return lines + _table(rows, list(_TELEMETRY_COLUMNS.values()), missingval="-")


def _cpu(env: dict) -> list[str]:
    cpu = env.get("cpu", {})
    lines = _section("CPU")
    lines.append(_line("model", cpu.get("model")))
    lines.append(_line("logical cpus", cpu.get("logical_cpus")))
    lines.append(_line("affinity cpus", cpu.get("affinity_cpus")))
    if cpu.get("cgroup_cpu_quota") is not None:
        lines.append(_line("cgroup cpu quota", cpu.get("cgroup_cpu_quota")))
    lines.append(_line("torch threads", cpu.get("torch_threads")))
    llc = cpu.get("llc_bytes")
    lines.append(_line("largest cache", None if llc is None else f"{llc / 2**20:g} MiB"))
    lines.append(_line("memory", _gib(env.get("memory", {}).get("total_bytes"))))
    lines.append(_line("flags", " ".join(cpu.get("flags") or []) or "(none of interest)"))
    return lines


def _caches(env: dict) -> list[str]:
    """Each cache level of the measured device, and the last level memory-bound cases are sized
    and labelled by (cache-resident, partly resident, DRAM)."""
    caches = env.get("caches")
    if not isinstance(caches, dict):
        return []
    lines = _section("Caches")
    for c in caches.get("levels") or []:
        where = ", ".join(x for x in (c.get("shared_by"), c.get("source")) if x)
        lines.append(_line(c.get("name", "?"), f"{size_text(c.get('bytes') or 0)} ({where})"))
    if not caches.get("levels"):
        lines.append(_line("levels", "none reported: memory-bound rows are taken as DRAM"))
    llc = caches.get("last_level_bytes")
    if llc:
        lines.append(
            _line(
                "last level",
                f"{caches.get('last_level')} {size_text(llc)} (cases under "
                f"{size_text(DRAM_FACTOR * llc)}: in cache, no DRAM share)",
            )
        )
    return lines


def _compilers(env: dict) -> list[str]:
    lines = _section("Compilers")
    for name, info in (env.get("compilers") or {}).items():
        if not info:
            lines.append(_line(name, "not found"))
        else:
            note = f" [{info['note']}]" if info.get("note") else ""
            lines.append(_line(name, f"{info.get('version') or '?'} ({info.get('path')}){note}"))
    return lines


def _hardware_profile(env: dict) -> list[str]:
    lines = _section("Hardware profile")
    prof = env.get("profile") or {}
    if prof.get("name"):
        title = f" - {prof['title']}" if prof.get("title") else ""
        lines.append(_line("profile", f"{prof['name']}{title}"))
        lines.append(_line("matched by", prof.get("matched_by")))
        if prof.get("message"):
            lines.append(f"  {prof['message']}")
    else:
        lines.append(_line("profile", "none"))
        lines.append(f"  {prof.get('message') or 'no profile matches this device'}")
    return lines


def _env_vars(env: dict) -> list[str]:
    vars_ = env.get("env_vars") or {}
    if not vars_:
        return []
    return _section("Environment variables") + [f"  {k}={v}" for k, v in vars_.items()]


def _kernel_table(env: dict) -> list[str]:
    device = "cpu" if env.get("backend") == "cpu" else "cuda"
    rows = [
        [k.get("op"), k.get("impl"), "yes" if k.get("available") else "no", k.get("reason") or ""]
        for k in env.get("kernels") or []
    ]
    lines = _section(f"Kernel implementations (device {device})")
    return lines + _table(rows, ["op", "impl", "can run", "reason"])
