"""asv: optimizer-step and GEMM benchmarks (thin wrappers over dsbench.suites)."""

from benchmarks._adapter import asv_class
from dsbench.suites import BENCHMARKS

Adamw = asv_class(BENCHMARKS["adamw"])
Gemm = asv_class(BENCHMARKS["gemm"])
