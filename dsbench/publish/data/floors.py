"""Modelled floors: roofline and alpha-beta lower bounds on one case's time on one profile.

Everything here is *modelled*: derived from a benchmark case's counted work (FLOPs, bytes, bytes
on the wire; :class:`dsbench.suites.Work`) and a profile's datasheet figures, never measured
(:mod:`dsbench.publish.data.modelled` sets them beside measured values).

Floors (a lower bound on the time of one call, so a measured time is never below it):

* kernels (GEMM, AdamW, copy, prefill, decode):
  ``t >= max(FLOPs / peak_flops(dtype), bytes / memory_bandwidth)`` (roofline). The FLOP ceiling
  is the one the benchmark's own % of peak uses (``Profile.peak("flops:<dtype>")``): fp16 and
  bf16 on the matrix units (``fp16_matrix`` / ``bf16_matrix``), float32 on the **vector** units
  (``fp32``), because torch runs fp32 matmuls in full fp32 unless
  ``torch.backends.cuda.matmul.allow_tf32`` / ``set_float32_matmul_precision`` say otherwise,
  and dsbench leaves that at torch's default ("highest").
* collectives over n ranks (ring, as nccl-tests' bus bandwidth assumes):
  ``t ~ steps * alpha + busbw_factor * S / link_bandwidth``, steps = 2(n-1) for all-reduce and
  n-1 for reduce-scatter and all-gather, busbw_factor * S the bytes each rank sends
  (all-reduce 2(n-1)/n * S, reduce-scatter / all-gather (n-1)/n * S). alpha is the smallest
  per-step latency the vendor's own tuning model assumes (:data:`ALPHA`) and the link bandwidth
  is the profile's per-direction figure (:func:`link_bandwidth` for the MI300X mesh and the
  MI250X note): an estimate that stays a floor, because no protocol has both the lowest latency
  and the full line rate.
* training steps are not modelled (:data:`NOT_MODELLED`).
"""

from __future__ import annotations

from dataclasses import dataclass

from dsbench.hardware import Profile, get_profile
from dsbench.records import Row
from dsbench.suites import BENCHMARKS, Work
from dsbench.suites.comm import RING_STEPS


@dataclass(frozen=True)
class Alpha:
    """Per-step latency of a ring collective, and where the number comes from."""

    seconds: float
    source: str


ALPHA: dict[str, Alpha] = {
    "nvidia": Alpha(
        0.47e-6,
        "NCCL's tuning model (NVIDIA/nccl src/graph/tuning.cc, hwLat[NVLINK][Ring][LL] = 0.47 us "
        "per ring step; the LL protocol has the lowest latency, its base/launch latency of "
        "3.6 us is left out)",
    ),
    "amd": Alpha(
        2.3e-6,
        "RCCL's tuning model (ROCm/rccl src/graph/tuning.cc, hwLat[NVLINK = xGMI][Ring][LL] = "
        "2.3 us per ring step; base/launch latency left out)",
    ),
    "generic": Alpha(0.0, "no per-step latency is assumed for generic devices (pure bandwidth)"),
}
"""alpha of the alpha-beta model per vendor: a module constant because hardware profiles do not
carry latencies (their schema rejects unknown fields)."""

PEER_LINK_GBPS: dict[str, tuple[float, str]] = {
    "mi300x": (
        64.0,
        "AMD CDNA 3 white paper: 8 MI300X fully connected, one Infinity Fabric link of 64 GB/s "
        "per direction to each peer, 7 links = 448 GB/s in all",
    ),
}
"""Full-mesh platforms: a rank reaches each peer over its own link, so n ranks use n-1 links."""

LINK_NOTES: dict[str, str] = {
    "mi250x-gcd": (
        "200 GB/s per direction is the link between the two GCDs of one MI250X package; a ring "
        "over more than 2 GCDs also crosses packages at 50-100 GB/s per direction (OLCF Frontier "
        "guide), so for n > 2 this floor is optimistic"
    ),
}

NOT_MODELLED: dict[str, str] = {
    "train_step": (
        "not modelled: a training step is forward, backward, ZeRO collectives and the optimizer "
        "overlapped in engine-specific ways, and dsbench counts only its 6·N·T model FLOPs; the "
        "only floor those give is the 100%-MFU time, which says nothing about memory or link "
        "limits (MFU is reported with the measured rows)"
    ),
}


@dataclass(frozen=True)
class Floor:
    """A modelled lower bound on one call's time on one profile."""

    seconds: float | None
    """None when the case is not modelled (``basis`` says why)."""
    value: float | None
    """The benchmark's primary metric at the floor time (GB/s, TFLOP/s, ms ...), or None."""
    limit: str
    """What bounds it: ``compute (<peak key>)``, ``memory``, ``link``, ``latency``; '' if not
    modelled."""
    basis: str
    """The formula with its inputs, or ``not modelled: why``."""

    @property
    def modelled(self) -> bool:
        return self.seconds is not None


def _fmt_time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.4g} ms"
    return f"{seconds * 1e6:.4g} us"


def not_modelled(why: str) -> Floor:
    return Floor(None, None, "", why if why.startswith("not modelled") else f"not modelled: {why}")


def resolve_profile(profile: str | Profile) -> Profile:
    return profile if isinstance(profile, Profile) else get_profile(profile)


def flops_peak_kind(name: str, params: dict, row: Row | None = None) -> str | None:
    """The ``Profile.peak`` kind for a case's FLOPs: the one its own % of peak uses."""
    bench = BENCHMARKS.get(name)
    if bench is not None:
        for metric in bench.metrics:
            if metric.peak and metric.peak.startswith("flops:"):
                try:
                    return metric.peak.format(**params)
                except (KeyError, IndexError):
                    break
    for entry in ((row.metrics if row else None) or {}).values():
        kind = (entry.peak.kind if entry.peak else None) or ""
        if kind.startswith("flops:"):
            return kind
    if "dtype" in params:
        return f"flops:{params['dtype']}"
    return None


def link_bandwidth(profile: Profile, ranks: int) -> tuple[float | None, str]:
    """Per-direction link bandwidth (GB/s) one rank of ``ranks`` can send at, and why."""
    fig = profile.link_bandwidth_gbps
    if fig.value is None:
        return None, f"{profile.name} has no link bandwidth ({fig.na or 'not measured'})"
    if profile.name in PEER_LINK_GBPS:
        per_peer, source = PEER_LINK_GBPS[profile.name]
        bw = min(fig.value, (ranks - 1) * per_peer)
        return bw, f"min({fig.value:g}, (n-1) x {per_peer:g}) GB/s ({source})"
    note = f"; {LINK_NOTES[profile.name]}" if profile.name in LINK_NOTES else ""
    return fig.value, f"{fig.value:g} GB/s per direction{note}"


def _primary_value(name: str, work: Work, seconds: float) -> float | None:
    bench = BENCHMARKS.get(name)
    if bench is None or seconds <= 0:
        return None
    try:
        return bench.primary.value(work, seconds)
    except (ZeroDivisionError, ValueError):
        return None


def _collective_floor(name: str, params: dict, work: Work, profile: Profile) -> Floor:
    if name not in RING_STEPS:
        return not_modelled(f"collective '{name}' has no ring model")
    n = params.get("ranks")
    if not isinstance(n, int) or n < 2:
        return not_modelled(f"needs at least 2 ranks, the case has {n}")
    bw, link_why = link_bandwidth(profile, n)
    if bw is None:
        return not_modelled(link_why)
    alpha = ALPHA.get(profile.vendor, ALPHA["generic"])
    steps = RING_STEPS[name](n)
    per_rank = work.busbw_factor * work.wire_bytes
    t_alpha, t_beta = steps * alpha.seconds, per_rank / (bw * 1e9)
    seconds = t_alpha + t_beta
    basis = (
        f"alpha-beta, ring over n={n}: {steps} steps x {alpha.seconds * 1e6:g} us "
        f"+ {work.busbw_factor:.4g} x {work.wire_bytes:.4g} B / {bw:g} GB/s = "
        f"{_fmt_time(t_alpha)} + {_fmt_time(t_beta)} = {_fmt_time(seconds)}; "
        f"alpha: {alpha.source}; link: {link_why}"
    )
    limit = "latency" if t_alpha > t_beta else "link"
    return Floor(seconds, _primary_value(name, work, seconds), limit, basis)


def case_floor(
    name: str, params: dict, work: Work | None, profile: str | Profile, row: Row | None = None
) -> Floor:
    """The modelled floor of one case (benchmark ``name`` with ``params`` doing ``work``)."""
    profile = resolve_profile(profile)
    if name in NOT_MODELLED:
        return not_modelled(NOT_MODELLED[name])
    if work is None:
        return not_modelled("no counted work for this case")
    if work.wire_bytes > 0:
        return _collective_floor(name, params, work, profile)
    if work.flops <= 0 and work.bytes <= 0:
        return not_modelled("the case counts neither FLOPs nor bytes")
    terms: list[tuple[float, str, str]] = []  # (seconds, limit, text)
    if work.flops > 0:
        kind = flops_peak_kind(name, params, row)
        if kind is None:
            return not_modelled("FLOPs are counted but no dtype says which peak applies")
        try:
            fig = profile.peak(kind)
        except ValueError as exc:
            return not_modelled(str(exc))
        key = next((k for k, f in profile.peak_tflops.items() if f is fig), kind)
        if fig.value is None:
            return not_modelled(f"{profile.name} has no {key} peak ({fig.na or 'not measured'})")
        t = work.flops / (fig.value * 1e12)
        text = f"{work.flops:.4g} FLOP / {fig.value:g} TFLOP/s [{key}] = {_fmt_time(t)}"
        terms.append((t, f"compute ({key})", text))
    if work.bytes > 0:
        fig = profile.memory_bandwidth_gbps
        if fig.value is None:
            return not_modelled(
                f"{profile.name} has no memory bandwidth ({fig.na or 'not measured'})"
            )
        t = work.bytes / (fig.value * 1e9)
        terms.append((t, "memory", f"{work.bytes:.4g} B / {fig.value:g} GB/s = {_fmt_time(t)}"))
    seconds, limit, _ = max(terms)
    texts = [text for _, _, text in terms]
    basis = "roofline: " + (texts[0] if len(texts) == 1 else "max(" + ", ".join(texts) + ")")
    return Floor(seconds, _primary_value(name, work, seconds), limit, basis)
