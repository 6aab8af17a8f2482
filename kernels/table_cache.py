"""The small device tables multi-tensor kernels take (pointer lists, chunk maps), built once per
list layout and kept for the last few layouts: the one cache the Triton and CUDA AdamW share."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class TableCache(Generic[T]):
    """Least-recently-used map from a layout key to its table (``size`` entries at most)."""

    def __init__(self, size: int = 16):
        self.size = size
        self._items: OrderedDict[Hashable, T] = OrderedDict()

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The table for ``key``, built by ``build()`` on a miss."""
        value = self._items.get(key)
        if value is None:
            value = self._items[key] = build()
            if len(self._items) > self.size:
                self._items.popitem(last=False)
        else:
            self._items.move_to_end(key)
        return value

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
