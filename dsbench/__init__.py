"""dsbench: honest benchmarks for ZeRO-style distributed training on CUDA, ROCm and CPU."""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("dsbench")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
