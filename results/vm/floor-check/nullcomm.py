"""Is the sequence floor what the engine's step costs when communication is free?

Both ranks run dsbench's engine (shm kernels, the suite's case) concurrently, each on its own
core, with every collective made free: reduce-scatter/all-reduce/all-gather and the shm barrier
do nothing (the shard keeps stale values, the norm's square-sum is zero; timing only). Per-step
median of N steps, then the suite's measure_floor in the same process (sequence floor and
back-to-back optimizer). "real" runs the same with the collectives left in place.

Run from the project root (a probe, not part of the package; it reaches into the engine):
    PYTHONPATH=.:results/vm/floor-check .venv/bin/python results/vm/floor-check/nullcomm.py \
        STEPS REPEATS [NULL_FLAGS, e.g. 10] [STAGES, e.g. 123]
Output of `... nullcomm.py 40 3 10 123` at db20d75: nullcomm.log beside this file."""
import sys, time, statistics
import torch

def rank_main(payload, device, send):
    import torch.distributed as dist
    from dsbench.suites.base import Context
    from dsbench.suites import training as T
    from dsbench.suites.step_floor import measure_floor, owned_elements
    from dsbench.kernels import registry
    import kernels.shm as kshm
    stage, null = payload["stage"], payload["null"]
    world, rank = dist.get_world_size(), dist.get_rank()
    params = dict(model="mlp", engine="dsbench", comm="shm", kernels="best", stage=stage,
                  micro_batch=16, grad_accum=2, dtype="float32", ranks=2)
    ctx = Context(device="cpu", backend="cpu", suite="training", rank=rank, world_size=world)
    built = T._build(params, ctx, world)
    train_step, micro_batches = T._step_functions(built, params, ctx, world)
    eng = built.engine
    for _ in range(5):
        train_step()
    dist.barrier()
    if null:
        def rs(output, input, group=None, divide_by=None, accumulate=False, sq=None):
            if sq is not None:
                sq.zero_()
            return output
        eng.comm._reduce_scatter = rs
        eng.comm._allreduce = lambda t, group=None: t
        eng.comm._allgather = lambda o, i, group=None: o
        kshm._Workspace.barrier = lambda self: None
    for _ in range(3):
        train_step()
    ts = []
    for _ in range(payload["steps"]):
        t0 = time.perf_counter(); train_step(); ts.append(time.perf_counter() - t0)
    step = statistics.median(ts) * 1e3
    adamw = registry.get("adamw", (built.kernels or {}).get("adamw", "torch"))
    floor = measure_floor(built.preset, micro_batches(), dtype=torch.float32, device="cpu",
                          owned=owned_elements(built.preset.num_params(), stage, world),
                          adamw=adamw.load(), fused=getattr(eng, "_fused", built.fused))
    send({"rank": rank, "stage": stage, "null": null, "step_ms": round(step, 2),
          **{k: round(v, 2) for k, v in floor["floor_ms"].items()}})
    if null:
        return
    eng.destroy()

if __name__ == "__main__":
    from dsbench.distributed import spawn_ranks
    for rep in range(int(sys.argv[2]) if len(sys.argv) > 2 else 1):
        for stage in [int(c) for c in (sys.argv[4] if len(sys.argv) > 4 else "123")]:
            for null in [x == "1" for x in (sys.argv[3] if len(sys.argv) > 3 else "10")]:
                out = {}
                try:
                    spawn_ranks("nullcomm:rank_main", 2, {"stage": stage, "null": null, "steps": int(sys.argv[1])},
                                on_message=lambda r, m: out.__setitem__(r, m))
                except Exception as e:
                    print("failed", stage, null, repr(e)[:300])
                for r in sorted(out):
                    d = out[r]; seq = d["forward_backward"] + d["optimizer"]; b2b = d["forward_backward"] + d["optimizer_back_to_back"]
                    print(f"stage {stage} {'null' if null else 'real'} rank {r}: step {d['step_ms']:.2f} ms; floor seq {seq:.2f} (fb {d['forward_backward']:.2f} opt {d['optimizer']:.2f}), b2b {b2b:.2f}; seq/step {seq/d['step_ms']:.3f} b2b/step {b2b/d['step_ms']:.3f}", flush=True)
