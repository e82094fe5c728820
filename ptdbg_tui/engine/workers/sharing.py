"""A result pickled in another process that names objects both processes hold by their index in a
list each side builds the same way (a pair's rows, their records and results): only what the other
process made travels, since a pair's rows pickled whole cost as much as reading them."""

from __future__ import annotations

import io
import pickle
from collections.abc import Iterable, Sequence
from typing import IO, Any

from ptdbg_tui.compare.model import Row


def row_objects(rows: Iterable[Row]) -> list[object]:
    """What a pair's diagnosis may name of its rows: each row, its records, stack and result, in an order
    both processes build alike."""
    return [x for r in rows for x in (r, r.npu, r.bench, r.stack, r.result)]


def dumps(obj: object, shared: Sequence[object]) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, shared).dump(obj)
    return buffer.getvalue()


def loads(data: bytes | memoryview, shared: Sequence[object]) -> Any:
    return _Unpickler(io.BytesIO(data), shared).load()


class _Pickler(pickle.Pickler):
    def __init__(self, file: IO[bytes], shared: Sequence[object]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._index = {id(o): i for i, o in enumerate(shared)}

    def persistent_id(self, obj: Any) -> int | None:
        return self._index.get(id(obj))


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: IO[bytes], shared: Sequence[object]) -> None:
        super().__init__(file)
        self._shared = shared

    def persistent_load(self, pid: Any) -> object:
        return self._shared[pid]
