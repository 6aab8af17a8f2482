"""asv: collective benchmarks over spawned local ranks (thin wrappers over dsbench.suites)."""

from benchmarks._adapter import asv_class
from dsbench.suites import BENCHMARKS

Allreduce = asv_class(BENCHMARKS["allreduce"])
ReduceScatter = asv_class(BENCHMARKS["reduce_scatter"])
