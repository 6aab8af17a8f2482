"""Run a workload through real DeepSpeed (``deepspeed.initialize``) with the same ds_config.

On CPU DeepSpeed needs ``DS_ACCELERATOR=cpu`` (set here before the import), gloo, bf16 instead of
fp16 ("Type fp16 is not supported on your device"), and ``"torch_adam": true`` to avoid a JIT
build of its CPU Adam; ``engine.destroy()`` must run before ``destroy_process_group()``.
"""

from __future__ import annotations

import os

from dsbench.errors import UsageError
from dsbench.zero.config import DSConfig

INSTALL_HINT = "install it with: DS_BUILD_OPS=0 pip install 'dsbench[deepspeed]'"


def deepspeed_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("deepspeed")
    except metadata.PackageNotFoundError:
        return None


def import_deepspeed(device: str):
    if device.startswith("cpu"):
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    if deepspeed_version() is None:
        raise UsageError(f"--engine deepspeed: DeepSpeed is not installed; {INSTALL_HINT}")
    import deepspeed

    return deepspeed


def build_deepspeed_engine(
    model, cfg: DSConfig, *, device: str, fused_optimizer: bool | None = None
):
    deepspeed = import_deepspeed(device)
    import torch.distributed as dist

    ds_config = cfg.to_deepspeed_dict()
    cpu = device.startswith("cpu")
    if cpu and cfg.precision == "fp16":
        raise UsageError(
            "DeepSpeed refuses fp16 on CPU ('Type fp16 is not supported on your "
            "device'); use bf16 in the ds_config"
        )
    opt = ds_config.get("optimizer")
    if opt is not None:
        params = opt.setdefault("params", {})
        if cpu:
            params.setdefault("torch_adam", True)  # DeepSpeed's CPU Adam is a JIT build
        if fused_optimizer is not None and params.get("torch_adam"):
            params["fused"] = fused_optimizer  # passed through to torch.optim.AdamW
    ds_config.setdefault("steps_per_print", 10**9)
    if not deepspeed.comm.is_initialized():
        deepspeed.init_distributed(dist_backend=dist.get_backend(), auto_mpi_discovery=False)
    engine, *_ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=ds_config
    )
    destroy = engine.destroy

    def destroy_once() -> None:
        # DeepSpeedEngine.__del__ calls destroy() again, possibly after the process group is
        # gone, where the optimizer's destroy() fails in a rank query: detach the optimizer after
        # the explicit call so the second one has nothing to do.
        destroy()
        engine.optimizer = None

    engine.destroy = destroy_once
    return engine
