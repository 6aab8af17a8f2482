"""Run a workload through real DeepSpeed (``deepspeed.initialize``) with the same ds_config.

On CPU DeepSpeed needs ``DS_ACCELERATOR=cpu`` (set here before the import), gloo, bf16 instead of
fp16 ("Type fp16 is not supported on your device"), and ``"torch_adam": true`` to avoid a JIT
build of its CPU Adam; ``engine.destroy()`` must run before ``destroy_process_group()``.

Checkpoints: DeepSpeed 0.18's ``save_checkpoint`` has rank 0 write ``latest`` as soon as its
own files are written, before the barrier that waits for the other ranks' files
(``runtime/engine.py``, ``save_checkpoint``), so a rank killed part-way through its shard leaves
``latest`` naming a checkpoint that cannot be loaded ("PytorchStreamReader failed reading zip
archive"), and a restart fails. dsbench therefore calls it with ``save_latest=False`` and, once
every rank has returned from it (it ends with a barrier), has rank 0 replace ``latest``
atomically (temporary file, fsync, rename): ``latest`` names a complete checkpoint at every
moment, as with dsbench's own checkpoints.

The save passes through :mod:`dsbench.procs.faults`' save points as dsbench's does, so tests and
``dsbench soak`` can kill a rank part-way through it: ``save.begin`` (nothing written yet),
``save.shard`` (this rank's ZeRO optimizer-state file half written) and ``save.rename`` (rank 0:
every rank's files written, ``latest`` not yet updated); the step is DeepSpeed's
``global_steps``. With no fault set, the files are written by DeepSpeed's own code.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

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
        kwargs = opt.setdefault("params", {})  # DeepSpeed's ds_config: the optimizer's kwargs
        if cpu:
            kwargs.setdefault("torch_adam", True)  # DeepSpeed's CPU Adam is a JIT build
        if fused_optimizer is not None and kwargs.get("torch_adam"):
            kwargs.update(fused=fused_optimizer)  # passed through to torch.optim.AdamW
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
    _wrap_save(engine)
    _same_timeout_in_every_group(device)
    return engine


def _same_timeout_in_every_group(device: str) -> None:
    """DeepSpeed makes its data-parallel groups with ``dist.new_group``, which gives a group
    torch's default timeout (30 minutes for gloo) instead of the one the ranks' process group
    was started with (``dsbench train --timeout``, ``dsbench soak --hang-timeout``): a rank left
    waiting in one of them on a hung peer waited half an hour before anyone was named. Every
    group gets the default group's timeout. Private torch API; where it is missing, nothing
    changes."""
    import torch
    from torch.distributed import distributed_c10d as c10d

    try:
        default = c10d._get_default_group()
        timeout = default._get_backend(torch.device(device)).options._timeout
        groups = [g for g in c10d._world.pg_map if g is not default]
    except (AttributeError, RuntimeError):
        return
    for group in groups:
        with contextlib.suppress(AttributeError, RuntimeError, ValueError):
            c10d._set_pg_timeout(timeout, group)


def _wrap_save(engine) -> None:
    """``latest`` updated only once every rank's files are written, and the fault points (see
    the module's docstring)."""
    import io

    import torch
    import torch.distributed as dist

    from dsbench.procs import faults
    from dsbench.zero.checkpoint import write_durably

    save_checkpoint, ck = engine.save_checkpoint, engine.checkpoint_engine
    plain_save = ck.save

    def save(save_dir, tag=None, client_state=None, save_latest=True, **kwargs):
        step = engine.global_steps
        faults.point("save.begin", step)
        tag = tag or f"global_step{step}"  # DeepSpeed's default tag
        saved = save_checkpoint(save_dir, tag, client_state=client_state or {},
                                save_latest=False, **kwargs)  # fmt: skip
        if save_latest:  # every rank's files are written: DeepSpeed's save ends in a barrier
            faults.point("save.rename", step)
            if dist.get_rank() == 0:
                write_durably(Path(save_dir) / "latest", str(tag).encode())
            dist.barrier()
        return saved

    def save_file(state_dict, path: str):
        if not os.environ.get(faults.ENV) or "optim_states" not in os.path.basename(path):
            return plain_save(state_dict, path)
        buffer = io.BytesIO()
        torch.save(state_dict, buffer)
        data = buffer.getvalue()
        with open(path, "wb") as f:  # half of it, then the fault, then the rest
            f.write(data[: len(data) // 2])
            f.flush()
            faults.point("save.shard", engine.global_steps)
            f.write(data[len(data) // 2 :])
        return None

    engine.save_checkpoint = save
    ck.save = save_file
