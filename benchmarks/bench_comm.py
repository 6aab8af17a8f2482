"""asv: collective benchmarks over spawned local ranks (thin wrappers over dsbench.suites.comm):
busbw in GB/s, as nccl-tests reports it; the ranks are spawned inside each measurement."""

from benchmarks._adapter import asv_class
from dsbench.suites import BENCHMARKS

Allreduce = asv_class(BENCHMARKS["allreduce"])
ReduceScatter = asv_class(BENCHMARKS["reduce_scatter"])
Allgather = asv_class(BENCHMARKS["allgather"])
