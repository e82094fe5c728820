"""Opening dump files without ever blocking or leaving the dump: the checks every reader shares.

A named pipe opened for reading blocks until a writer appears, and a device can block or never
end, so files are opened non-blocking and refused unless they are regular files. A name from a
dump's metadata becomes a file name inside the dump's data folder only when it cannot point
anywhere else, and a file opened must resolve inside its dump's folder: a symbolic link in a
colleague's dump to ``~/.ssh/…`` or another project's data is refused, never read (a link that
stays inside the folder is followed). See docs/security.md.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import stat

#: Surrogates that no byte of a file name decodes to (undecodable bytes become U+DC80..U+DCFF).
_LONE_SURROGATE = re.compile("[\ud800-\udc7f\udd00-\udfff]")

_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def file_kind(mode: int) -> str:
    """What a file is, in words."""
    return next((word for test, word in _KINDS if test(mode)), "an unknown kind of file")


#: ``open_regular``'s ``within`` for a tensor file: its data folder lies in its rank folder.
TENSOR_FILE = 2
#: Why a file that resolves outside its dump's folder is refused (an OSError's strerror).
OUTSIDE = "resolves outside the dump's folder (a symbolic link out of the dump is never followed)"


@functools.lru_cache(maxsize=256)
def _real_folder(folder: str) -> str:
    """A folder's real path, with a separator at its end (asked for every tensor file of a dump)."""
    return os.path.join(os.path.realpath(folder), "")


def _real_path(fd: int, path: str) -> str:
    """Where an open file really is: what the kernel opened (no second lookup a link could redirect)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # no /proc: the path resolved again
        return os.path.realpath(path)


def _confine(fd: int, path: str, levels: int) -> None:
    """Raise OSError unless the open file lies inside the folder ``levels`` above its name."""
    folder = path if os.path.isabs(path) else os.path.abspath(path)  # getcwd only where needed
    for _ in range(levels):
        folder = os.path.dirname(folder)
    if not _real_path(fd, path).startswith(_real_folder(folder)):
        raise OSError(errno.EACCES, OUTSIDE, path)


def open_regular(path: str | os.PathLike[str], within: int | None = 1) -> tuple[int, os.stat_result]:
    """A read-only descriptor of a regular file and its status; anything else raises OSError
    (a directory: ``EISDIR``; a pipe, socket or device: ``EINVAL``, with what it is in words; a file
    that resolves outside the folder ``within`` levels above its name: ``EACCES``, :data:`OUTSIDE`).
    ``within``: 1 for a file of a rank folder (a pkl, a sidecar, dump.json), 2 for a tensor file
    (its rank folder holds its data folder); ``None`` for a file the user named, not a dump's."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        st = os.fstat(fd)
        if within is not None:
            _confine(fd, os.fspath(path), within)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        code = errno.EISDIR if stat.S_ISDIR(st.st_mode) else errno.EINVAL
        raise OSError(code, f"is {file_kind(st.st_mode)}, not a regular file", os.fspath(path))
    return fd, st


def safe_name(name: str) -> bool:
    """Whether ``name`` can be a file name inside a folder, and only there: no separator that would
    make it a path of its own (``../x``, ``/etc/x``), no NUL that no file name can hold."""
    return (
        bool(name) and "/" not in name and "\\" not in name and "\0" not in name and name not in (".", "..")
    )


def holds_lone_surrogate(name: str) -> bool:
    """Whether ``name`` holds a UTF-16 surrogate (from a JSON ``\\ud800`` escape) that no file name
    can hold: opening it would raise UnicodeEncodeError."""
    return not name.isascii() and _LONE_SURROGATE.search(name) is not None


def describe(e: OSError) -> str:
    """An OSError's reason in words (a symlink loop named as such: ELOOP's own words do not)."""
    text = e.strerror or str(e) or type(e).__name__
    return text + " (a symbolic link loop?)" if e.errno == errno.ELOOP else text


def reason(e: OSError) -> str:
    """An OSError in words, with its path: ``/x/y: permission denied``."""
    text = describe(e)
    text = text[:1].lower() + text[1:]
    return f"{e.filename}: {text}" if e.filename else text


class TensorFileError(Exception):
    """A tensor file is missing, truncated or unreadable (``missing``: it does not exist, which a
    dump still being written may mend)."""

    def __init__(self, message: str, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing
