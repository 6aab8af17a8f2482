"""Pure parsers of captured tool output (nvidia-smi, rocm-smi, nvcc, hipcc, /proc files) and
the queries they parse; unit-tested on captured text, no tool is run here."""

from __future__ import annotations

import json
import re

NVIDIA_SMI_FIELDS = (
    "index,name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,"
    "power.limit,temperature.gpu"
)
NVIDIA_SMI_ARGS = (f"--query-gpu={NVIDIA_SMI_FIELDS}", "--format=csv,noheader,nounits")
ROCM_SMI_ARGS = (
    "--showproductname",
    "--showdriverversion",
    "--showclocks",
    "--showpower",
    "--showtemp",
    "--showmaxpower",
    "--json",
)

CPU_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "amx_bf16",
    "amx_fp16",
    "amx_tile",
    "asimd",
    "sve",
    "bf16",
)
"""The CPU features that decide which CPU kernels (oneDNN, AMX, SVE) torch can use."""


def _size_bytes(text: str) -> int | None:
    """``"32768K"`` -> 33554432; ``"2M"``, ``"1024"`` (bytes) also accepted."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.IGNORECASE)
    if not m:
        return None
    return int(m.group(1)) * 1024 ** " KMG".index(m.group(2).upper() or " ")


def _missing(value: str | None) -> bool:
    """nvidia-smi/rocm-smi spell 'no value' as ``[N/A]``, ``N/A``, ``[Not Supported]``, ..."""
    v = (value or "").strip()
    return not v or v.upper() in ("N/A", "NA", "NONE") or (v.startswith("[") and v.endswith("]"))


def _number(value: str | None, kind: type = float) -> int | float | None:
    if _missing(value):
        return None
    m = re.search(r"-?\d+(?:\.\d+)?", value)
    if not m:
        return None
    return kind(float(m.group()))


# ---------------------------------------------------------------------------------------------
# pure parsers (unit-tested on captured tool output)


def parse_nvidia_smi(text: str) -> list[dict]:
    """Rows of ``nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS> --format=csv,noheader,nounits``.

    Values such as ``[N/A]`` or ``[Not Supported]`` become ``None``. A GPU name holding a comma
    (none known, but the format allows it) is re-joined.
    """
    n_fields = NVIDIA_SMI_FIELDS.count(",") + 1
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < n_fields:
            continue
        extra = len(parts) - n_fields
        name = ", ".join(parts[1 : 2 + extra])
        idx, driver, sm, mem, max_sm, max_mem, power, temp = [parts[0], *parts[2 + extra :]]
        if _number(idx, int) is None:
            continue
        rows.append(
            {
                "index": _number(idx, int),
                "name": None if _missing(name) else name,
                "driver_version": None if _missing(driver) else driver,
                "clocks_sm_mhz": _number(sm, int),
                "clocks_mem_mhz": _number(mem, int),
                "clocks_max_sm_mhz": _number(max_sm, int),
                "clocks_max_mem_mhz": _number(max_mem, int),
                "power_limit_w": _number(power, float),
                "temperature_c": _number(temp, int),
                "source": "nvidia-smi",
            }
        )
    return rows


def _mhz(card: dict[str, str], clock: str) -> int | None:
    """``"sclk clock speed:": "(1700Mhz)"`` or ``"sclk clock level:": "1 (1700Mhz)"`` -> 1700."""
    for key, value in card.items():
        if key.startswith(clock) and (m := re.search(r"(\d+(?:\.\d+)?)\s*mhz", value, re.I)):
            return int(float(m.group(1)))
    return None


def parse_rocm_smi(text: str) -> list[dict]:
    """Cards from ``rocm-smi <ROCM_SMI_ARGS>`` JSON (key spellings vary across ROCm releases).

    rocm-smi may print warnings before the JSON; they are skipped. It reports no maximum clocks
    with these flags, so ``clocks_max_*`` stay ``None``.
    """
    start = text.find("{")
    if start < 0:
        return []
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError:
        return []
    system = {k.strip().rstrip(":").lower(): str(v) for k, v in data.get("system", {}).items()}
    rows = []
    for card_key, raw in data.items():
        m = re.fullmatch(r"card(\d+)", card_key)
        if not m or not isinstance(raw, dict):
            continue
        card = {k.strip().rstrip(":").strip().lower(): str(v) for k, v in raw.items()}

        def first(*keys: str, card=card) -> str | None:
            for key in keys:
                if not _missing(card.get(key)):
                    return card[key].strip()
            return None

        temps = [
            card.get(k)
            for k in ("temperature (sensor edge) (c)", "temperature (sensor junction) (c)")
        ]
        temps += [v for k, v in card.items() if k.startswith("temperature")]
        temperature = next((t for t in map(_number, temps) if t is not None), None)
        driver = first("driver version") or system.get("driver version")
        rows.append(
            {
                "index": int(m.group(1)),
                "name": first("card series", "card model", "card sku", "device name"),
                "driver_version": None if _missing(driver) else driver,
                "clocks_sm_mhz": _mhz(card, "sclk"),
                "clocks_mem_mhz": _mhz(card, "mclk"),
                "clocks_max_sm_mhz": None,
                "clocks_max_mem_mhz": None,
                "power_limit_w": _number(first("max graphics package power (w)")),
                "temperature_c": None if temperature is None else int(temperature),
                "source": "rocm-smi",
            }
        )
    return sorted(rows, key=lambda r: r["index"])


def parse_nvcc_version(text: str) -> str | None:
    """``"Cuda compilation tools, release 13.0, V13.0.88"`` -> ``"13.0"``."""
    m = re.search(r"release\s+(\d+(?:\.\d+)*)", text)
    return m.group(1) if m else None


def parse_hipcc_version(text: str) -> str | None:
    """``"HIP version: 6.2.41133-dd7f95766"`` -> ``"6.2.41133-dd7f95766"``."""
    m = re.search(r"HIP version:\s*(\S+)", text)
    return m.group(1) if m else None


def parse_nccl_version(version: tuple | list | int | None) -> str | None:
    """torch.cuda.nccl.version(): a tuple ``(2, 21, 5)`` in recent torch, an int before.

    The int is ``major*10000 + minor*100 + patch`` from NCCL 2.9 on, ``major*1000 + minor*100 +
    patch`` before (NCCL's own ``NCCL_VERSION_CODE``).
    """
    if version is None:
        return None
    if isinstance(version, tuple | list):
        return ".".join(str(int(v)) for v in version)
    code = int(version)
    major, rest = divmod(code, 10000) if code >= 10000 else divmod(code, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


ARM_CPU_PARTS = {
    "0xd0c": "Neoverse-N1",
    "0xd40": "Neoverse-V1",
    "0xd49": "Neoverse-N2",
    "0xd4f": "Neoverse-V2",
    "0xd84": "Neoverse-V3",
    "0xd8e": "Neoverse-N3",
}
"""Arm Ltd. (implementer 0x41) server cores: Arm /proc/cpuinfo has no model name, only a part
number (as in util-linux ``lscpu``). Grace is Neoverse-V2."""


def parse_cpuinfo(text: str) -> tuple[str | None, list[str]]:
    """(model, relevant flags) from /proc/cpuinfo (x86 ``flags`` or Arm ``Features``)."""
    model, flags, implementer, part = None, set(), None, None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if not sep or not value:
            continue
        if key in ("model name", "cpu model", "model", "hardware") and not model:
            if key != "model" or not value.isdigit():  # x86 'model' is a number
                model = value
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
        elif key == "cpu implementer":
            implementer = implementer or value.lower()
        elif key == "cpu part":
            part = part or value.lower()
    if model is None and implementer == "0x41" and part in ARM_CPU_PARTS:
        model = f"ARM {ARM_CPU_PARTS[part]}"
    return model, [f for f in CPU_FLAGS if f in flags]


def parse_driver_file(text: str) -> str | None:
    """``/proc/driver/nvidia/version`` ('... Kernel Module  550.54.15 ...') or amdgpu's version."""
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", text)
    if m:
        return m.group(1)
    text = text.strip()
    return text if re.fullmatch(r"\d+(?:\.\d+)+\S*", text) else None
