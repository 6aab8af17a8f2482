"""Which ds_config keys dsbench's engine reads, which DeepSpeed accepts that it does not (and
whether each is harmless, so ignored with a warning, or changes what is computed, so refused),
and the one-pass reader that sorts a config's keys into those kinds."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dsbench.values import show_json
from dsbench.zero import hf_auto
from dsbench.zero.fields import READ, ConfigError

AUTO = hf_auto.AUTO

# --------------------------------------------------------------------------------------------
# Keys: what dsbench's engine reads, and what DeepSpeed accepts that it does not
# --------------------------------------------------------------------------------------------


def _never(value: Any) -> bool:
    return False


def _truthy(value: Any) -> bool:
    return bool(value)


def _is_set(value: Any) -> bool:
    return value is not None and value != {} and value is not False


def _enabled(value: Any) -> bool:
    if isinstance(value, dict):
        return bool(value.get("enabled", False))
    return _is_set(value)


# Active (True) means dsbench's engine must refuse; otherwise the key is ignored (harmless:
# logging, monitoring, checkpoint I/O, or memory/speed tuning that leaves the numbers alone).
_TOP_NOT_IMPLEMENTED: dict[str, Callable[[Any], bool]] = {
    "aio": _never,
    "allgather_size": _never,  # the old boolean zero_optimization format
    "amp": _enabled,
    "autotuning": _never,
    "checkpoint": _never,
    "comet": _never,
    "comms_logger": _never,
    "communication_data_type": _is_set,
    "compile": _enabled,
    "compression_training": _is_set,
    "csv_monitor": _never,
    "curriculum_learning": _enabled,
    "data_efficiency": _enabled,
    "data_types": lambda v: isinstance(v, dict) and v.get("grad_accum_dtype") is not None,
    "dataloader_drop_last": _never,
    "datastates_ckpt": _never,
    "disable_allgather": _never,
    "dump_state": _never,
    "eigenvalue": _enabled,
    "elasticity": _enabled,
    "flops_profiler": _never,
    "gradient_predivide_factor": lambda v: v != 1,
    "graph_harvesting": _never,
    "hybrid_engine": _enabled,
    "memory_breakdown": _never,
    "nebula": _never,
    "pipeline": _is_set,  # pipeline parallelism (PipelineModule)
    "prescale_gradients": _truthy,
    "progressive_layer_drop": _enabled,
    "quantize_training": _enabled,
    "seq_parallel_communication_data_type": _never,
    "sequence_parallel_size": lambda v: v not in (None, 1),
    "sparse_attention": _is_set,
    "sparse_gradients": _truthy,
    "tensor_parallel": lambda v: isinstance(v, dict) and v.get("autotp_size") not in (None, 0, 1),
    "tensorboard": _never,
    "timers": _never,
    "use_data_before_expert_parallelism": _truthy,  # mixture of experts
    "vocabulary_size": _never,
    "wandb": _never,
    "weight_quantization": _is_set,
    "zero_allow_untested_optimizer": _never,
    "zero_force_ds_cpu_optimizer": _never,
}

_TOP_IMPLEMENTED = (
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
    "optimizer",
    "scheduler",
    "gradient_clipping",
    "fp16",
    "bf16",
    "bfloat16",
    "zero_optimization",
    "steps_per_print",
    "wall_clock_breakdown",
    "activation_checkpointing",
)

_ZERO_ALIASES = {
    "prefetch_bucket_size": "stage3_prefetch_bucket_size",
    "param_persistence_threshold": "stage3_param_persistence_threshold",
    "max_reuse_distance": "stage3_max_reuse_distance",
    "max_live_parameters": "stage3_max_live_parameters",
}

_ZERO_NOT_IMPLEMENTED: dict[str, Callable[[Any], bool]] = {
    "sub_group_size": _never,
    "round_robin_gradients": _never,
    "zero_hpz_partition_size": lambda v: v not in (None, 0, 1),
    "zero_quantized_weights": _truthy,
    "zero_quantized_nontrainable_weights": _truthy,
    "zero_quantized_gradients": _truthy,
    "zeropp_loco_param": _is_set,
    "mics_shard_size": lambda v: v not in (None, -1),
    "mics_hierarchical_params_gather": _never,
    "zenflow": _is_set,
    "legacy_stage1": _truthy,
    "load_from_fp32_weights": _never,
    "elastic_checkpoint": _never,
    "ignore_unused_parameters": _never,
    "use_multi_rank_bucket_allreduce": _never,
    "memory_efficient_linear": _never,
    "pipeline_loading_checkpoint": _never,
    "override_module_apply": _never,
    "log_trace_cache_warnings": _never,
    "enable_sanity_checks": _never,
    # ZeRO-3 leaf modules (mixture-of-experts blocks gathered whole): refused when any is named
    "leaf_module": lambda v: isinstance(v, dict) and any(v.get(k) for k in v),
    "stage3_gather_fp16_weights_on_model_save": _never,  # deprecated spelling
}
for _name in (
    "gather_16bit_weights_on_model_save",
    "model_persistence_threshold",
    "module_granularity_threshold",
    "use_all_reduce_for_fetch_params",
):  # DeepSpeed accepts both the field name and its stage3_ alias
    _ZERO_NOT_IMPLEMENTED[_name] = _ZERO_NOT_IMPLEMENTED[f"stage3_{_name}"] = _never

_FP16_NOT_IMPLEMENTED = {"auto_cast": _truthy, "fp16_master_weights_and_grads": _truthy}
_BF16_NOT_IMPLEMENTED = {
    "immediate_grad_update": _never,
    "check_grad_overflow": _truthy,
    "bf16_master_weights_and_grads": _truthy,
    "bf16_optimizer_states": _truthy,
}

# Adam/AdamW params: those DeepSpeed's FusedAdam takes, and those only torch's Adam/AdamW take.
_ADAM_PARAMS = ("lr", "betas", "eps", "weight_decay", "torch_adam", "adam_w_mode", "amsgrad")
_FUSED_ONLY_PARAMS = {"bias_correction": _never, "set_grad_none": _never}
_TORCH_ONLY_PARAMS = {
    "maximize": _truthy,
    "foreach": _never,
    "capturable": _never,
    "differentiable": _never,
    "fused": _never,
}
# DeepSpeed's own optimizers (config.DEEPSPEED_OPTIMIZERS) besides adam/adamw; any other name
# is looked up in torch.optim.
_DS_OTHER_OPTIMIZERS = (
    "adagrad",
    "lamb",
    "onebitadam",
    "onebitlamb",
    "zerooneadam",
    "muadam",
    "muadamw",
    "musgd",
    "lion",
    "muon",
)
_BATCH_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


def _describe(path: str, value: Any) -> str:
    """``path=value`` for a refused setting; for a section, the switch that turned it on."""
    if isinstance(value, dict):
        for switch in ("device", "enabled", "autotp_size"):
            if switch in value:
                return f"{path}.{switch}={show_json(value[switch])}"
        return path
    return f"{path}={show_json(value)}"


class _Reader:
    """One pass over the raw dict: unknown keys, "auto" placeholders, keys dsbench ignores."""

    def __init__(self):
        self.autos: list[str] = []  # "auto" left for the batch resolution (batch sizes only)
        self.ignored: list[str] = []
        self.warnings: list[str] = []  # one line each, passed to warn()
        self.unsupported: list[str] = []

    def section(self, raw: Mapping, key: str) -> dict:
        value = raw.get(key, {})
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be an object {{...}}, got {show_json(value)}")
        return value

    def keys(
        self,
        section: Mapping,
        path: str,
        implemented: tuple[str, ...],
        not_implemented: Mapping[str, Callable[[Any], bool]],
        *,
        active: bool = True,
    ) -> None:
        """Unknown keys are errors; keys dsbench does not implement are sorted into
        ``ignored`` and ``unsupported`` (only when the section is ``active``, e.g. fp16 on)."""
        valid = [*implemented, *not_implemented]
        for key, value in section.items():
            if key in implemented:
                continue
            if key not in not_implemented:
                raise READ.unknown(f"{path}.{key}", key, valid)
            if not_implemented[key](value) and active:
                self.unsupported.append(_describe(f"{path}.{key}", value))
            else:
                self.ignored.append(f"{path}.{key}")

    def take(self, section: Mapping, path: str, key: str, out: dict, name: str | None = None):
        """Copy ``section[key]`` into ``out[name]``; absent keys and "auto" stay absent ("auto"
        is noted in ``autos``: only the batch sizes' are still there, see load_config)."""
        if key not in section:
            return
        value = section[key]
        if isinstance(value, str) and value == AUTO:
            self.autos.append(f"{path}.{key}" if path else key)
            return
        out[name or key] = value
