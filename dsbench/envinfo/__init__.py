"""The environment a number was measured in: versions, devices, clocks, compilers, profile, kernels.

:func:`collect_env` goes into every result file; :func:`summary_fields` flattens it into the
string fields that ``compare`` selects on (``--baseline python=3.11``) and checks for
confounders; :func:`format_env` is the text ``dsbench env`` prints (the benchmark-minded cousin of
DeepSpeed's ``ds_report``).

Everything here is read-only and must never fail: a probe that cannot answer (tool missing,
timed out, old torch, no git) records ``None`` or a note saying why. GPU telemetry comes from
``nvidia-smi`` / ``rocm-smi`` queries that only read; no clock, power or mode is ever changed.

The parts: :mod:`~dsbench.envinfo.parse` (pure parsers of captured tool output),
:mod:`~dsbench.envinfo.collect` (the probes and :func:`collect_env`),
:mod:`~dsbench.envinfo.report` (:func:`format_env`).
"""

from dsbench.envinfo.collect import (  # noqa: F401  (re-exported)
    ENV_VAR_PREFIXES,
    TOOL_TIMEOUT_S,
    collect_env,
    git_commit,
)
from dsbench.envinfo.parse import (  # noqa: F401  (re-exported)
    ARM_CPU_PARTS,
    CPU_FLAGS,
    NVIDIA_SMI_ARGS,
    NVIDIA_SMI_FIELDS,
    ROCM_SMI_ARGS,
    parse_cpuinfo,
    parse_driver_file,
    parse_hipcc_version,
    parse_nccl_version,
    parse_nvcc_version,
    parse_nvidia_smi,
    parse_rocm_smi,
)
from dsbench.envinfo.report import format_env  # noqa: F401  (re-exported)
from dsbench.records import summary_fields  # noqa: F401  (re-exported)
