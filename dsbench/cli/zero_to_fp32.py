"""``dsbench zero-to-fp32 CHECKPOINT_DIR OUTPUT``: consolidate a dsbench ZeRO checkpoint (every
rank's shard) into one fp32 state_dict file, without GPUs or a process group — the counterpart of
DeepSpeed's ``zero_to_fp32.py``. Load it with ``torch.load(OUTPUT, weights_only=True)``."""

from __future__ import annotations

import argparse
from pathlib import Path

from dsbench.errors import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", metavar="CHECKPOINT_DIR", help="the --checkpoint folder")
    p.add_argument("output", metavar="OUTPUT", help="file to write (torch.save of a state_dict)")
    p.add_argument("--tag", help="checkpoint tag (default: the one in 'latest')")


def run(args: argparse.Namespace) -> int:
    import torch

    from dsbench.zero.checkpoint import consolidate

    out = Path(args.output)
    if out.exists():
        raise UsageError(f"{out} already exists; choose another output file")
    state = consolidate(args.checkpoint, args.tag)
    tmp = out.with_name(out.name + ".tmp")
    torch.save(state, tmp)
    tmp.replace(out)
    total = sum(t.numel() for t in state.values())
    print(f"wrote {out}: {len(state)} tensors, {total:,} fp32 parameters")
    return 0
