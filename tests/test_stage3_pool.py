"""Stage 3's pool of released gather buffers (``Stage3._recycle``): a buffer goes back to the pool
only on CPUs and only when nothing else still references its memory (a view that autograd saved
would otherwise be overwritten by the next gather)."""

import types

import torch

from dsbench.zero.stage3 import Stage3


def _stage3(device: str) -> Stage3:
    return Stage3(types.SimpleNamespace(device=torch.device(device)), parts=None)  # _recycle


def test_an_unreferenced_buffer_is_pooled_by_size():
    stage3 = _stage3("cpu")
    buffer = torch.empty(8)
    stage3._recycle(buffer)
    assert stage3.gather_pool == {8: [buffer]}


def test_a_buffer_with_a_live_view_is_left_to_be_freed():
    stage3 = _stage3("cpu")
    buffer = torch.empty(8)
    saved = buffer[2:4].view(2, 1)  # as a view saved for backward would hold it
    stage3._recycle(buffer)
    assert stage3.gather_pool == {}
    del saved
    stage3._recycle(buffer)
    assert stage3.gather_pool == {8: [buffer]}


def test_no_pool_off_cpus():
    stage3 = _stage3("meta")
    stage3._recycle(torch.empty(8, device="meta"))
    assert stage3.gather_pool == {}
