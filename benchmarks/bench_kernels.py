"""asv: optimizer-step, GEMM and memory-copy benchmarks (thin wrappers over dsbench.suites):
AdamW in GB/s, GEMM in TFLOP/s, the copy ceiling in GB/s."""

from benchmarks._adapter import asv_class
from dsbench.suites import BENCHMARKS

Adamw = asv_class(BENCHMARKS["adamw"])
Gemm = asv_class(BENCHMARKS["gemm"])
Copy = asv_class(BENCHMARKS["copy"])
