"""Writing a rank dump so that a reader following it never sees a line without its data.

Each ``.npy`` goes to a hidden temporary name and is renamed into place; only then is its pkl
line appended and flushed. A process killed at any point leaves a pkl whose every complete line
has its tensor file. The dumper's background thread and the test/benchmark generators both
write through this class, so there is one writer of the format. The sidecars (modules, calls) are
appended the same way, a call's line before its first pkl line.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ptdbg_tui.formats.calls import CallSpec, Convert, calls_path, encode_call_line
from ptdbg_tui.formats.file_writes import DIR_MODE, FILE_MODE
from ptdbg_tui.formats.layout import PKL_NAMES
from ptdbg_tui.formats.modules import ModuleChain, encode_module_line, sidecar_path
from ptdbg_tui.formats.pkl_line import encode_stack_line, encode_tensor_line
from ptdbg_tui.formats.records import Frame


class RankWriter:
    """Appends records to one rank dir (``.../rankR/``)."""

    def __init__(
        self,
        rank_dir: str | os.PathLike[str],
        mode: str = "api_stack",
        summary_only: bool = False,
        fresh: bool = True,
    ) -> None:
        self.rank_dir = Path(rank_dir)
        self.pkl = self.rank_dir / PKL_NAMES.get(mode, f"{mode}_dump.pkl")
        self.npy_dir = self.pkl.with_suffix("")
        self.summary_only = summary_only
        self.rank_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        if fresh:  # as the original: a new dump replaces the old one
            for path in (self.pkl, sidecar_path(self.pkl), calls_path(self.pkl)):
                path.unlink(missing_ok=True)
            shutil.rmtree(self.npy_dir, ignore_errors=True)
        if not summary_only:
            self.npy_dir.mkdir(mode=DIR_MODE, exist_ok=True)
        self._pkl = self._open(self.pkl)
        self._modules: TextIO | None = None  # the sidecars: opened by their first line
        self._calls: TextIO | None = None

    @staticmethod
    def _open(path: Path) -> TextIO:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE)
        return os.fdopen(fd, "a", encoding="utf-8")

    def save_npy(self, name: str, array: np.ndarray) -> Path:
        """Write ``<name>.npy`` atomically (temporary file, then rename)."""
        final = self.npy_dir / f"{name}.npy"
        tmp = self.npy_dir / f".{name}.npy.tmp"
        try:
            with open(tmp, "wb") as f:
                np.save(f, np.asarray(array, order="C"), allow_pickle=False)  # keeps 0-d arrays 0-d
        except OSError as e:  # numpy's short write names neither the file nor the reason
            tmp.unlink(missing_ok=True)
            if e.filename is None:
                raise OSError(e.errno, e.strerror or str(e), str(final)) from e
            raise
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, final)
        return final

    def link_npy(self, name: str, existing: Path) -> Path:
        """Give ``<name>.npy`` the content of an npy already written: a hard link (a copy where the
        file system has none), placed atomically like :meth:`save_npy`."""
        final = self.npy_dir / f"{name}.npy"
        tmp = self.npy_dir / f".{name}.npy.tmp"
        tmp.unlink(missing_ok=True)
        try:
            os.link(existing, tmp)
        except OSError:
            shutil.copyfile(existing, tmp)
            os.chmod(tmp, FILE_MODE)
        os.replace(tmp, final)
        return final

    def write_tensor(
        self,
        name: str,
        dump_step: int,
        dtype: str,
        shape: Any,
        stats: list[Any],
        array: np.ndarray | None = None,
        same_as: Path | None = None,
        md5: str | None = None,
    ) -> Path | None:
        """One tensor/scalar record; its npy (``array``, or a link to the npy ``same_as`` holding the
        same data) lands first unless summary-only. Returns the npy written, if any."""
        npy = None
        if not self.summary_only:
            if same_as is not None:
                npy = self.link_npy(name, same_as)
            elif array is not None:
                npy = self.save_npy(name, array)
        self._line(self._pkl, encode_tensor_line(name, dump_step, dtype, shape, stats, md5))
        return npy

    def write_stack(self, name: str, frames: list[Frame] | list[list[Any]]) -> None:
        self._line(self._pkl, encode_stack_line(name, frames))

    def write_modules(self, call_key: str, chain: ModuleChain) -> None:
        if self._modules is None:
            self._modules = self._open(sidecar_path(self.pkl))
        self._line(self._modules, encode_module_line(call_key, chain))

    def write_call(self, spec: CallSpec, convert: Convert | None = None) -> None:
        """A call's sidecar line; ``convert`` names the values only the writer's caller knows (torch's)."""
        if self._calls is None:
            self._calls = self._open(calls_path(self.pkl))
        self._line(self._calls, encode_call_line(spec, convert))

    @staticmethod
    def _line(f: TextIO, text: str) -> None:
        f.write(text + "\n")
        f.flush()

    def close(self) -> None:
        for f in (self._pkl, self._modules, self._calls):
            if f is not None and not f.closed:
                f.close()
