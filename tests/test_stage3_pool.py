"""Stage 3's pool of released gather buffers (``Stage3._recycle``): a buffer goes back to the pool
only on CPUs and only when nothing else still references its memory (a view that autograd saved
would otherwise be overwritten by the next gather)."""

import types

import torch

from dsbench.zero.stage3 import Stage3


def _engine(device: str):
    return types.SimpleNamespace(device=torch.device(device), _gather_pool={})


def test_an_unreferenced_buffer_is_pooled_by_size():
    engine = _engine("cpu")
    buffer = torch.empty(8)
    Stage3._recycle(engine, buffer)
    assert engine._gather_pool == {8: [buffer]}


def test_a_buffer_with_a_live_view_is_left_to_be_freed():
    engine = _engine("cpu")
    buffer = torch.empty(8)
    saved = buffer[2:4].view(2, 1)  # as a view saved for backward would hold it
    Stage3._recycle(engine, buffer)
    assert engine._gather_pool == {}
    del saved
    Stage3._recycle(engine, buffer)
    assert engine._gather_pool == {8: [buffer]}


def test_no_pool_off_cpus():
    engine = _engine("meta")
    Stage3._recycle(engine, torch.empty(8, device="meta"))
    assert engine._gather_pool == {}
