"""The box's ceilings for ``dsbench gpu-check``, measured in its own process; one JSON line out.

    python -m dsbench.gpu.ceilings --device cuda

- memory: :func:`dsbench.hardware.ceilings.measure_ceilings` (the best of four stream kernels;
  ``copy_bandwidth_gbps``: bytes copied per second by a device-to-device ``Tensor.copy_``) and
  its square matmul sweep;
- a GEMM shape sweep in bf16 and fp16 in the way of ml-engineering's mamf-finder ("Maximum
  Achievable Matmul FLOPS"): ``a @ b`` over the (M, N, K) of :data:`GPU_SHAPES` (tiny
  :data:`CPU_SHAPES` on a CPU), 2·M·N·K FLOPs per call, the best of a few timed groups per shape;
  the best shape's rate is what this box reaches, set beside the datasheet's peak.
"""

from __future__ import annotations

import getopt
import itertools
import json
import sys

GPU_SHAPES = (
    *itertools.product((4096, 8192), (4096, 8192), (4096, 8192)),
    (16384, 8192, 8192),
    (8192, 16384, 4096),
)
CPU_SHAPES = ((128, 128, 128), (256, 256, 256), (512, 256, 256))


def shape_sweep(device: str, dtypes: tuple[str, ...], shapes) -> dict[str, dict]:
    """Per dtype: the best TFLOP/s over ``shapes``, its shape and every shape's rate."""
    import torch

    from dsbench.hardware.ceilings import _best_time

    dev = torch.device(device)
    gpu = dev.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(dev)) if gpu else (lambda: None)
    g = torch.Generator(device=dev).manual_seed(0)
    out = {}
    for name in dtypes:
        dtype = getattr(torch, name)
        rates = {}
        for m, n, k in shapes:
            a = torch.randn(m, k, generator=g, device=dev, dtype=dtype)
            b = torch.randn(k, n, generator=g, device=dev, dtype=dtype)
            for _ in range(3):  # warm-up: library heuristics, clocks
                a @ b
            sync()
            seconds = _best_time(lambda a=a, b=b: a @ b, sync, 3, 5 if gpu else 1,
                                 min_seconds=0.1)  # fmt: skip
            rates[f"{m}x{n}x{k}"] = 2 * m * n * k / seconds / 1e12
            del a, b
        best = max(rates, key=rates.__getitem__)
        out[name] = {"tflops": rates[best], "shape": best, "by_shape": rates}
    return out


USAGE = "usage: python -m dsbench.gpu.ceilings [-h] [--device {cpu,cuda}]"


def main(argv: list[str] | None = None) -> int:
    """Measure and print the ceilings; its one option, ``--device cpu|cuda`` (default cuda), is
    read with :mod:`getopt` (command lines are parsed in :mod:`dsbench.cli` alone)."""
    try:
        opts, rest = getopt.getopt(sys.argv[1:] if argv is None else argv, "h", ["help", "device="])
    except getopt.GetoptError as exc:
        print(f"{USAGE}\npython -m dsbench.gpu.ceilings: error: {exc}", file=sys.stderr)
        return 2
    given = dict(opts)
    if "-h" in given or "--help" in given:
        print(USAGE)
        return 0
    choice = given.get("--device", "cuda")
    if rest or choice not in ("cpu", "cuda"):
        why = f"unrecognized arguments: {' '.join(rest)}" if rest else f"--device {choice!r}"
        print(f"{USAGE}\npython -m dsbench.gpu.ceilings: error: {why}", file=sys.stderr)
        return 2
    from dsbench.hardware.ceilings import measure_ceilings

    device = "cuda:0" if choice == "cuda" else "cpu"
    found = measure_ceilings(device)
    gpu = choice == "cuda"
    dtypes = ("bfloat16", "float16") if gpu else ("bfloat16", "float32")
    found["shape_sweep"] = shape_sweep(device, dtypes, GPU_SHAPES if gpu else CPU_SHAPES)
    print(json.dumps(found), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
