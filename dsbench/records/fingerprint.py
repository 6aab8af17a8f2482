"""The hardware a run was measured on (its fingerprint), and when two runs' hardware is unlike.

A folder name (``results/<machine>/``, the host name) says nothing about the hardware: two
cloud VMs both called ``vm`` may be an AMD EPYC with a 32 MiB L3 and an Intel Xeon with AMX
and a 300 MiB L3, and a comparison of the two measures the CPUs, not the change. So every
result file's environment carries ``hardware`` (:func:`from_env` at collection time, written
by ``dsbench.envinfo.collect_env``): the readable fields below and ``id``, a short hash of the
fields that identify hardware. Older files have no such block; their fingerprint is derived
from what their environment already stores (CPU model, logical CPUs, LLC, ISA flags, memory,
the GPUs), the same way; only the CPU's L2 is then unknown. asv's runs store the CPU model and
count alone.

What counts as *different hardware* (:func:`differences`; no verdict across it):

- the CPU model, the logical CPUs, the CPU's L2 and last-level cache, the ISA extensions
  dsbench records (AVX-512, AMX, SVE: they decide which kernels run);
- the memory, in GiB rounded to the nearest (a VM's MemTotal moves by a few MiB between boots);
- the GPUs' models and count (a CPU run of a GPU box uses no GPU: none), and their L2.

A field that one side does not record (an old file's L2, an asv run's memory) is not a
difference: fingerprints are compared on the fields both know, so their ``id`` may differ
while they are like hardware. A fingerprint with neither a CPU model nor a GPU is *unknown*;
an unknown one is never like a known one (it may be any machine), and two unknown ones are
not told apart.

*Confounders only* (listed above a comparison by ``dsbench compare``, still judged): the GPU
driver, the OS and kernel, the host name, the CPUs a run may use (affinity, a cgroup quota) and
torch's threads. They change what is measured but are not another machine: the same box after
a driver update is still the box whose history a run continues.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields

from .base import is_number

IDENTITY = ("cpu", "cpus", "memory_gib", "l2_bytes", "llc_bytes", "isa", "gpus", "gpu_l2_bytes")
"""The fields that make hardware different; ``driver`` is kept for reading, a confounder."""
LABELS = {"cpu": "CPU", "cpus": "logical CPUs", "memory_gib": "memory", "l2_bytes": "L2",
          "llc_bytes": "LLC", "isa": "ISA", "gpus": "GPUs", "gpu_l2_bytes": "GPU L2"}  # fmt: skip
HARDWARE_AXES = frozenset({"backend", "device", "device_count", "profile", "cpu", "machine"})
"""Selector keys that pick sides by hardware: with one of them as the compared axis
(``backend=cuda`` vs ``backend=rocm``, ``profile=a100`` vs ``profile=mi250x``) the hardware is
what is compared, and unlike hardware is judged."""


def _int(value) -> int | None:
    if isinstance(value, str) and value.strip().isdigit():  # asv's "num_cpu": "2"
        value = int(value)
    return int(value) if is_number(value) and value > 0 else None


def _size(n: int | None) -> str:
    """``33554432`` -> ``32 MiB``."""
    if n is None:
        return "?"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n} B"


def _short_model(model: str) -> str:
    """``Intel(R) Xeon(R) Processor`` -> ``Intel Xeon Processor``."""
    for mark in ("(R)", "(r)", "(TM)", "(tm)"):
        model = model.replace(mark, "")
    return " ".join(model.split())


@dataclass(frozen=True, kw_only=True)
class Fingerprint:
    """The hardware of one run (see the module's docstring); None where not recorded."""

    cpu: str | None = None
    cpus: int | None = None
    memory_gib: int | None = None
    l2_bytes: int | None = None
    llc_bytes: int | None = None
    isa: tuple[str, ...] | None = None
    gpus: tuple[str, ...] | None = None
    """One model name per GPU, sorted; ``()`` for a run on the CPU."""
    gpu_l2_bytes: int | None = None
    driver: str | None = None
    """A confounder, not identity."""

    @property
    def known(self) -> bool:
        return bool(self.cpu or self.gpus)

    @property
    def id(self) -> str:
        """8 hex digits over :data:`IDENTITY` (unknown fields included, as null)."""
        identity = {k: getattr(self, k) for k in IDENTITY}
        text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:8] if self.known else "unknown"

    @property
    def name(self) -> str:
        """``AMD EPYC (2 CPUs, 24 GiB, L2 512 KiB, LLC 32 MiB)``; with GPUs ``8x NVIDIA H100
        80GB HBM3 (L2 50 MiB), host AMD EPYC (...)``; ``unknown hardware`` when unknown."""
        if not self.known:
            return "unknown hardware"
        facts = [f"{self.cpus} CPUs" if self.cpus else None,
                 f"{self.memory_gib} GiB" if self.memory_gib else None,
                 f"L2 {_size(self.l2_bytes)}" if self.l2_bytes else None,
                 f"LLC {_size(self.llc_bytes)}" if self.llc_bytes else None,
                 self._isa_tag()]  # fmt: skip
        shown = ", ".join(f for f in facts if f)
        host = _short_model(self.cpu or "CPU not recorded") + (f" ({shown})" if shown else "")
        if not self.gpus:
            return host
        models = sorted(set(self.gpus))
        gpus = ", ".join(f"{self.gpus.count(m)}x {m}" for m in models)
        l2 = f" (L2 {_size(self.gpu_l2_bytes)})" if self.gpu_l2_bytes else ""
        return f"{gpus}{l2}, host {host}"

    def _isa_tag(self) -> str | None:
        """The widest vector or matrix unit: ``AMX``, ``AVX-512``, ``SVE``; None otherwise."""
        isa = set(self.isa or ())
        if any(f.startswith("amx") for f in isa):
            return "AMX"
        return "AVX-512" if "avx512f" in isa else "SVE" if "sve" in isa else None

    def to_json(self) -> dict:
        doc = asdict(self)
        for key in ("isa", "gpus"):
            if doc[key] is not None:
                doc[key] = list(doc[key])
        return {"id": self.id, "name": self.name, **doc}

    @classmethod
    def from_json(cls, doc: dict) -> Fingerprint:
        """The stored block (``env["hardware"]``); unknown keys and bad values are dropped."""
        values = {}
        for f in fields(cls):
            v = doc.get(f.name)
            if f.name in ("isa", "gpus"):
                v = tuple(str(x) for x in v) if isinstance(v, list) else None
            elif f.name in ("cpu", "driver"):
                v = str(v) if v else None
            else:
                v = _int(v)
            values[f.name] = v
        return cls(**values)


def from_env(env: dict) -> Fingerprint:
    """The fingerprint of a recorded environment: its stored ``hardware`` block, else derived
    from the fields older files store (see the module's docstring)."""
    env = env if isinstance(env, dict) else {}
    stored = env.get("hardware")
    if isinstance(stored, dict):
        return Fingerprint.from_json(stored)
    cpu = env.get("cpu") if isinstance(env.get("cpu"), dict) else {}
    memory = env.get("memory") if isinstance(env.get("memory"), dict) else {}
    devices = [d for d in env.get("devices") or [] if isinstance(d, dict)]
    flags = cpu.get("flags")
    total = _int(memory.get("total_bytes"))
    gpus: tuple[str, ...] | None = None
    gpu_l2 = None
    backend = env.get("backend")
    if backend == "cpu":
        gpus = ()
    elif backend in ("cuda", "rocm"):
        gpus = tuple(sorted(str(d.get("name") or d.get("arch") or "?") for d in devices))
        gpu_l2 = max((x for d in devices if (x := _int(d.get("l2_cache_bytes")))), default=None)
    return Fingerprint(
        cpu=str(cpu["model"]) if cpu.get("model") else None,
        cpus=_int(cpu.get("logical_cpus")),
        memory_gib=round(total / 2**30) if total else None,
        l2_bytes=_int(cpu.get("l2_bytes")),
        llc_bytes=_int(cpu.get("llc_bytes")),
        isa=tuple(sorted(str(f) for f in flags)) if isinstance(flags, list) else None,
        gpus=gpus,
        gpu_l2_bytes=gpu_l2,
        driver=str(env["driver"]) if env.get("driver") else None,
    )


def _text(key: str, value) -> str:
    if value is None:
        return "?"
    if key in ("l2_bytes", "llc_bytes", "gpu_l2_bytes"):
        return _size(value)
    if key == "memory_gib":
        return f"{value} GiB"
    if key == "isa":
        return " ".join(value) or "none"
    if key == "gpus":
        return ", ".join(value) or "none"
    return str(value)


def differences(a: Fingerprint, b: Fingerprint) -> list[str]:
    """What makes ``a`` and ``b`` different hardware, as ``CPU (Intel Xeon vs AMD EPYC)``;
    empty when they are like hardware. Fields unknown on either side are not compared; an
    unknown fingerprint differs from every known one."""
    if a.known != b.known:
        return [f"hardware ({a.name} vs {b.name})"]
    out = []
    for key in IDENTITY:
        x, y = getattr(a, key), getattr(b, key)
        if x is None or y is None or x == y:
            continue
        if key == "isa":
            only_a, only_b = sorted(set(x) - set(y)), sorted(set(y) - set(x))
            x, y = only_a or ("-",), only_b or ("-",)
        out.append(f"{LABELS[key]} ({_text(key, x)} vs {_text(key, y)})")
    return out


def what_differs(differences: list[str]) -> str:
    """The fields of :func:`differences`, without their values: ``CPU, LLC, ISA``."""
    return ", ".join(d.split(" (", 1)[0] for d in differences)


def like(a: Fingerprint, b: Fingerprint) -> bool:
    """Whether ``a`` and ``b`` are the same hardware (:func:`differences` finds nothing)."""
    return not differences(a, b)


def classes(prints: list[Fingerprint]) -> list[int]:
    """A class index per fingerprint, in order of first appearance: each joins the first class
    whose members it is like (all of them: likeness over partly known fields is not
    transitive), else starts a new one. Unknown fingerprints form one class of their own."""
    members: list[list[Fingerprint]] = []
    out = []
    for fp in prints:
        for i, group in enumerate(members):
            if all(like(fp, other) for other in group):
                group.append(fp)
                out.append(i)
                break
        else:
            members.append([fp])
            out.append(len(members) - 1)
    return out
