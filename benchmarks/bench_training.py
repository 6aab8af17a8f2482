"""asv: ZeRO training steps, dsbench's engine and DeepSpeed's (thin wrappers over
dsbench.suites.training); ranks are spawned inside each measurement."""

from benchmarks._adapter import asv_class
from dsbench.suites import BENCHMARKS

TrainStep = asv_class(BENCHMARKS["train_step"])
TrainStepOffload = asv_class(BENCHMARKS["train_step_offload"])
