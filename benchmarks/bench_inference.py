"""asv: GPT prefill and KV-cache decoding (thin wrappers over dsbench.suites.inference)."""

from benchmarks._adapter import asv_class
from dsbench.suites import BENCHMARKS

Prefill = asv_class(BENCHMARKS["prefill"])
Decode = asv_class(BENCHMARKS["decode"])
