"""The damaged-input corpus: a generator of damaged dumps, each with the problem its messages must
name and the entries its damage may cost; every other entry must still be compared as on the
undamaged dump.

Rank cases damage one rank folder of a small clean pair (pkl lines, npy files, the module
sidecar, the folders themselves); root cases damage what the two paths point at (a typo, a file, a
layout without pairs, msprobe's dump.json). Each case is built once per session in its own folder;
the rank cases are also linked as the ranks of one multi-rank pair, so that the app meets all of
them in one session.

Permission cases need a reader without root's power to read anything: :func:`without_dac` drops
CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the calling thread (threads started meanwhile inherit
that), or the test is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pickle
import shutil
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from ptdbg_tui.formats.calls import CallSpec, TensorArg, encode_call_line
from ptdbg_tui.formats.layout import rank_dir_path
from ptdbg_tui.formats.naming import entry_name, stack_name
from ptdbg_tui.formats.synthetic import write_array
from ptdbg_tui.formats.writer import RankWriter

FIXTURES = Path(__file__).parent.parent / "fixtures"
PKL = "api_stack_dump.pkl"
NPY = "api_stack_dump"
SIDECAR = "api_stack_dump.modules.jsonl"
CALLS_SIDECAR = "api_stack_dump.calls.jsonl"
#: (api, index, direction, inputs): the calls of the clean rank dump, in order.
CALLS = [
    ("Functional_conv2d", 0, "forward", 2),
    ("Functional_relu", 0, "forward", 1),
    ("Tensor_add", 0, "forward", 2),
    ("Torch_sum", 0, "forward", 1),
    ("Functional_conv2d", 0, "backward", 1),
]


def array_for(name: str) -> np.ndarray:
    return np.random.default_rng(zlib.crc32(name.encode())).standard_normal((4, 6)).astype(np.float32)


def entries() -> list[str]:
    """The clean rank dump's entry names, in file order."""
    names = []
    for api, index, direction, inputs in CALLS:
        names += [entry_name(api, index, direction, "input", (k,)) for k in range(inputs)]
        names.append(entry_name(api, index, direction, "output", (0,)))
    return names


def write_clean_rank(rank_dir: Path) -> None:
    """One rank dump as the project's dumper writes it: npy files, tensor and stack lines, sidecar."""
    w = RankWriter(rank_dir)
    try:
        for api, index, direction, inputs in CALLS:
            names = [entry_name(api, index, direction, "input", (k,)) for k in range(inputs)]
            for name in [*names, entry_name(api, index, direction, "output", (0,))]:
                write_array(w, name, array_for(name))
            call = f"{api}_{index}_{direction}"
            w.write_stack(stack_name(call), [["/home/u/model.py", "10", "forward", f"y = {api}(x)"]])
            if direction == "forward":
                w.write_modules(f"{api}_{index}", [("net", "Net"), (f"net.{api.lower()}", "Layer")])
    finally:
        w.close()


# --- damage helpers (on a rank folder) --------------------------------------------------------


def _lines(r: Path) -> list[bytes]:
    return (r / PKL).read_bytes().splitlines(keepends=True)


def _line_of(r: Path, name: str) -> int:
    return next(i for i, ln in enumerate(_lines(r)) if ln.startswith(json.dumps([name])[:-1].encode()))


def replace_line(r: Path, name: str, text: bytes | str) -> set[str]:
    """The tensor line of ``name`` replaced by ``text``; that entry may be lost."""
    lines = _lines(r)
    lines[_line_of(r, name)] = (text.encode() if isinstance(text, str) else text) + b"\n"
    (r / PKL).write_bytes(b"".join(lines))
    return {name}


def tensor_line(entry: str, **changes: object) -> str:
    """A tensor line of the clean dump with some fields changed (``field=...`` as raw JSON text)."""
    a = array_for(entry)
    fields = {
        "name": json.dumps(entry),
        "dump_step": "0",
        "empty": "[]",
        "dtype": '"torch.float32"',
        "shape": json.dumps(list(a.shape)),
        "stats": json.dumps([float(a.max()), float(a.min()), float(a.mean()), float(np.linalg.norm(a))]),
    }
    fields.update({k: str(v) for k, v in changes.items()})
    return "[" + ", ".join(fields.values()) + "]"


def insert_line(r: Path, at: int, text: bytes) -> set[str]:
    lines = _lines(r)
    lines.insert(at, text + b"\n")
    (r / PKL).write_bytes(b"".join(lines))
    return set()


def cut_in_line(r: Path, name: str) -> set[str]:
    """The pkl cut in the middle of the line of ``name``: that entry and all after it are lost."""
    lines = _lines(r)
    i = _line_of(r, name)
    (r / PKL).write_bytes(b"".join(lines[:i]) + lines[i][: len(lines[i]) // 2])
    names = entries()
    return set(names[names.index(name) :])


def replace_file(path: Path, make: Callable[[Path], None]) -> None:
    """Whatever ``path`` is, it becomes what ``make`` creates."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    make(path)


def npy(r: Path, name: str) -> Path:
    return r / NPY / f"{name}.npy"


def npy_header(shape: tuple[int, ...] | str, descr: str = "<f4", version: int = 1) -> bytes:
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".encode()
    text += b" " * (63 - (len(text) + 10) % 64) + b"\n"
    size = struct.pack("<H", len(text)) if version == 1 else struct.pack("<I", len(text))
    return b"\x93NUMPY" + bytes([version, 0]) + size + text


def symlink_loop(path: Path) -> None:
    path.symlink_to(path.name)


def lose(names: set[str] | frozenset[str], *_effects: object) -> set[str]:
    """What a damage costs, written after the damage itself: ``lose({MID}, path.unlink())``."""
    return set(names)


def fifo(path: Path) -> None:
    os.mkfifo(path)


ALL = frozenset(entries())
FIRST, MID, LAST = entries()[0], entries()[5], entries()[-1]
NON_UTF8 = b"Tensor_add_0_forward_output.\xff"  # not a valid name of the grammar either: a module name


# --- the cases --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One damaged input. ``damage(npu_rank, bench_rank)`` returns the entries it may cost (whose
    rows may differ from the clean dump's or vanish). ``expect``: one of these must be in the
    messages, lower-cased (``()``: nothing to say); ``expect_app`` where the app says it otherwise.
    ``root``: builds the two paths (and options) itself instead of damaging one rank."""

    name: str
    expect: tuple[str, ...]
    damage: Callable[[Path, Path], set[str] | frozenset[str] | None] | None = None
    expect_app: tuple[str, ...] | None = None
    privileged: bool = False  # needs a reader that root's DAC override does not help
    root: Callable[[Path], tuple[Path, Path, dict[str, object]]] | None = None
    cli_fails: bool = False  # nothing can be compared: the CLI exits 2 with the reason
    lost_limit: int | None = 0  # root cases: rows of the clean pair that may differ (None: any)
    summary: bool = False  # compared by statistics only: against the clean pair's statistics
    msprobe: bool = False  # a root case on msprobe dumps: against the clean msprobe pair

    @property
    def app_expect(self) -> tuple[str, ...]:
        return self.expect if self.expect_app is None else self.expect_app


CASES: list[Case] = []


def case(name: str, *expect: str, **kw: object) -> Callable[[Callable], Callable]:
    def add(fn: Callable) -> Callable:
        CASES.append(Case(name, tuple(e.lower() for e in expect), fn, **kw))
        return fn

    return add


def line_case(name: str, text: str | bytes, *expect: str, entry: str = MID) -> None:
    CASES.append(Case(name, tuple(e.lower() for e in expect), lambda n, b: replace_line(n, entry, text)))


# pkl: whole-file damage
case("pkl_cut_mid_line", "not valid json")(lambda n, b: cut_in_line(n, MID))
case("pkl_cut_in_first_line", "not valid json")(lambda n, b: cut_in_line(n, FIRST))
case("pkl_garbage_line", "not valid json")(lambda n, b: insert_line(n, 3, b"\x8f\x00garbage{{[}"))
case("pkl_nul_line", "not valid json")(lambda n, b: insert_line(n, 2, b"\0" * 100))
case("pkl_all_garbage", "not valid json")(
    lambda n, b: lose(ALL, (n / PKL).write_bytes(np.random.default_rng(1).bytes(3000).replace(b"\n", b"x")))
)
case("pkl_all_nul", "not valid json")(lambda n, b: lose(ALL, (n / PKL).write_bytes(b"\0" * 4096)))
case("pkl_empty", "holds no entries")(lambda n, b: lose(ALL, (n / PKL).write_bytes(b"")))
case("pkl_blank_lines_only", "holds no entries")(lambda n, b: lose(ALL, (n / PKL).write_bytes(b"\n \n\t\n")))
case("pkl_crlf_line_ends")(lambda n, b: (n / PKL).write_bytes((n / PKL).read_bytes().replace(b"\n", b"\r\n")))
case("pkl_duplicate_line", "duplicate entry name")(
    lambda n, b: insert_line(n, _line_of(n, MID), _lines(n)[_line_of(n, MID)].rstrip(b"\n"))
)
case("pkl_whole_file_twice", "duplicate entry name")(
    lambda n, b: (n / PKL).write_bytes((n / PKL).read_bytes() * 2)
)
case("pkl_line_10mib_long", "longer than")(lambda n, b: insert_line(n, 4, b'["' + b"x" * (9 << 20) + b'"]'))

# pkl: one line of the wrong shape or types
line_case("line_arity_5", json.dumps([MID, 0, [], "torch.float32", [4, 6]]), "expected 6 elements")
line_case("line_arity_7", tensor_line(MID)[:-1] + ", 1]", "expected 6 elements")
line_case("line_object", '{"name": 1}', "must be a json array")
line_case("line_number", "42", "must be a json array")
line_case("line_string", '"hello"', "must be a json array")
line_case("name_not_string", tensor_line(MID, name=42), "must be strings")
line_case("dtype_null", tensor_line(MID, dtype="null"), "must be strings")
line_case("shape_negative", tensor_line(MID, shape="[-4, 6]"), "non-negative")
line_case("shape_float", tensor_line(MID, shape="[4.0, 6]"), "non-negative")
line_case("shape_bool", tensor_line(MID, shape="[true, 6]"), "non-negative")
line_case("shape_object", tensor_line(MID, shape='{"a": 1}'), "shape must be a list")
line_case("shape_huge", tensor_line(MID, shape=f"[{2**40}, {2**40}]"), "too large")
line_case("shape_70_dims", tensor_line(MID, shape=json.dumps([1] * 70)), "too large")
line_case("dump_step_infinity", tensor_line(MID, dump_step="Infinity"), "dump_step must be an integer")
line_case("dump_step_1e400", tensor_line(MID, dump_step="1e400"), "dump_step must be an integer")
line_case("dump_step_nan", tensor_line(MID, dump_step="NaN"), "dump_step must be an integer")
line_case("dump_step_string", tensor_line(MID, dump_step='"zero"'), "dump_step must be an integer")
line_case("dump_step_5000_digits", tensor_line(MID, dump_step="9" * 5000), "not readable json")
line_case("stats_strings", tensor_line(MID, stats='["a", "b", "c", "d"]'), "stats holds")
line_case("stats_int_beyond_float", tensor_line(MID, stats=f"[{10**400}, 0, 0, 0]"), "stats holds")
line_case("stats_seven_values", tensor_line(MID, stats="[1, 2, 3, 4, 5, 6, 7]"), "stats has 7")
line_case("stats_object", tensor_line(MID, stats='[{"max": 1}, 0, 0, 0]'), "stats holds")
line_case("stats_not_a_list", tensor_line(MID, stats='"stats"'), "stats a list")
line_case("nesting_100k_open", "[" * 100_000, "nested too deeply")
line_case("nesting_5000_closed", "[" * 5000 + "]" * 5000, "nested too deeply")
line_case("nesting_in_stats", tensor_line(MID, stats="[" * 3000 + "]" * 3000), "nested too deeply")
line_case("name_parent_dirs", tensor_line(MID, name='"../../../../etc/hostname"'), "outside the dump folder")
line_case("name_absolute", tensor_line(MID, name='"/etc/hostname"'), "outside the dump folder")
line_case("name_backslashes", tensor_line(MID, name='"..\\\\..\\\\x"'), "outside the dump folder")
line_case(
    "name_nul", tensor_line(MID, name='"Tensor_add_0_forward_output\\u0000"'), "outside the dump folder"
)
line_case("name_empty", tensor_line(MID, name='""'), "outside the dump folder")
line_case(
    "stack_frames_not_lists",
    json.dumps([stack_name("Functional_relu_0_forward"), [["a"]]]),
    "stack frame is not",
    entry=MID,
)
case("stack_frame_deep", "stack frame is not")(
    lambda n, b: insert_line(
        n, 1, json.dumps([stack_name("Functional_conv2d_0_forward"), [[[[[[1]]]]], "1", "f", "s"]]).encode()
    )
)


@case("name_10k_characters", "file name too long")
def _long_name(n: Path, b: Path) -> set[str]:
    name = "Torch_" + "x" * 10_000 + "_0_forward_output.0"
    for r in (n, b):
        insert_line(r, len(_lines(r)), tensor_line(name).encode())
    return {name}


@case("name_not_utf8_both_sides")
def _non_utf8(n: Path, b: Path) -> None:
    for r in (n, b):
        data = tensor_line("PLACEHOLDER").encode().replace(b"PLACEHOLDER", NON_UTF8)
        insert_line(r, len(_lines(r)), data)
        with open(os.fsencode(r / NPY) + b"/" + NON_UTF8 + b".npy", "wb") as f:
            np.save(f, array_for("PLACEHOLDER"))


@case("name_with_markup_both_sides")
def _markup_name(n: Path, b: Path) -> None:
    name = "Tensor_[red]x[bold]_0_forward_output.0"
    for r in (n, b):
        insert_line(r, len(_lines(r)), tensor_line(name).encode())
        np.save(npy(r, name), array_for(name))


@case("name_json_escaped_not_utf8_both_sides")
def _escaped_non_utf8(n: Path, b: Path) -> None:
    """How Python's json (the original's writer) records a file name that is not UTF-8: ``\\udcff``."""
    name = NON_UTF8.decode("utf-8", "surrogateescape")
    for r in (n, b):
        line = tensor_line("PLACEHOLDER").replace('"PLACEHOLDER"', json.dumps(name))  # escaped: "\\udcff"
        insert_line(r, len(_lines(r)), line.encode())
        with open(os.fsencode(r / NPY) + b"/" + NON_UTF8 + b".npy", "wb") as f:
            np.save(f, array_for("PLACEHOLDER"))


line_case(
    "name_lone_surrogate",
    tensor_line(MID, name='"Tensor_add_0_forward_output.\\ud800"'),
    "lone utf-16 surrogate",
)
line_case("dtype_lone_surrogate", tensor_line(MID, dtype='"torch.\\ud800"'), "dtype")
case("stack_source_lone_surrogate")(
    lambda n, b: insert_line(
        n,
        1,
        json.dumps([stack_name("Functional_conv2d_0_forward"), [["m.py", "1", "f", "x\ud800"]]]).encode(),
    )
)
case("second_pkl_in_rank_folder", "holds several dump files")(
    lambda n, b: shutil.copyfile(n / PKL, n / "dump.pkl")
)
case("stack_source_not_utf8")(
    lambda n, b: insert_line(
        n,
        1,
        json.dumps([stack_name("Functional_conv2d_0_forward"), [["m.py", "1", "f", "SRC"]]])
        .encode()
        .replace(b"SRC", b"x = \xe9\xff"),
    )
)

# pkl: not a readable file
case("pkl_is_a_directory", "is a directory", cli_fails=True)(
    lambda n, b: lose(ALL, replace_file(n / PKL, Path.mkdir))
)
case("pkl_is_a_fifo", "named pipe", cli_fails=True)(lambda n, b: lose(ALL, replace_file(n / PKL, fifo)))
case("pkl_symlink_loop", "too many levels of symbolic links", cli_fails=True)(
    lambda n, b: lose(ALL, replace_file(n / PKL, symlink_loop))
)
case("pkl_dangling_symlink", "no such file", cli_fails=True)(
    lambda n, b: lose(ALL, replace_file(n / PKL, lambda p: p.symlink_to("gone.pkl")))
)

# npy files
case("npy_missing", "not found")(lambda n, b: lose({MID}, npy(n, MID).unlink()))
case("npy_zero_bytes", "empty: 0 bytes")(lambda n, b: lose({MID}, npy(n, MID).write_bytes(b"")))
case("npy_truncated", "truncated")(
    lambda n, b: lose({MID}, npy(n, MID).write_bytes(npy(n, MID).read_bytes()[:-10]))
)
case("npy_header_only", "truncated")(lambda n, b: lose({MID}, npy(n, MID).write_bytes(npy_header((4, 6)))))
case("npy_wrong_shape", "holds shape")(
    lambda n, b: lose({MID}, np.save(npy(n, MID), np.zeros((6, 4), np.float32)))
)
case("npy_wrong_dtype", "holds float64 data")(
    lambda n, b: lose({MID}, np.save(npy(n, MID), array_for(MID).astype(np.float64)))
)
case("npy_is_a_directory", "is a directory")(lambda n, b: lose({MID}, replace_file(npy(n, MID), Path.mkdir)))
case("npy_symlink_loop", "symbolic link loop")(
    lambda n, b: lose({MID}, replace_file(npy(n, MID), symlink_loop))
)
case("npy_is_a_fifo", "named pipe (fifo)")(lambda n, b: lose({MID}, replace_file(npy(n, MID), fifo)))
case("npy_object_array", "python objects")(
    lambda n, b: lose({MID}, np.save(npy(n, MID), np.full((4, 6), {"a": 1}, object), allow_pickle=True))
)
case("npy_pickle_file", "not a valid npy")(
    lambda n, b: lose({MID}, npy(n, MID).write_bytes(pickle.dumps([1, 2])))
)
case("npy_header_expression", "string on line 1: an expression")(  # never run, never shown as an ast repr
    lambda n, b: lose({MID}, npy(n, MID).write_bytes(npy_header("__import__('os').getpid()") + b"\0" * 96))
)
case("npy_bad_header", "not a valid npy")(
    lambda n, b: lose({MID}, npy(n, MID).write_bytes(npy_header("{{{{{") + b"\0" * 96))
)
case("npy_huge_shape", "truncated")(
    lambda n, b: lose({MID}, npy(n, MID).write_bytes(npy_header((4, 6, 2**40)) + b"\0" * 96))
)
case("npy_version_9", "unsupported npy format version")(
    lambda n, b: lose({MID}, npy(n, MID).write_bytes(npy_header((4, 6), version=9) + b"\0" * 96))
)
case("npy_random_bytes", "not a valid npy")(
    lambda n, b: lose({MID}, npy(n, MID).write_bytes(np.random.default_rng(2).bytes(200)))
)
case("npy_folder_is_a_file", "not a folder", summary=True)(
    lambda n, b: replace_file(n / NPY, lambda p: p.write_bytes(b"x"))
)
case("npy_folder_renamed", "no npy folder", summary=True)(lambda n, b: (n / NPY).rename(n / "npy_data"))
case("npy_folder_missing_on_bench", "holds no tensors", summary=True)(lambda n, b: shutil.rmtree(b / NPY))
case("npy_folder_is_a_fifo", "named pipe", summary=True)(lambda n, b: replace_file(n / NPY, fifo))

# the module sidecar: only the app reads it
case("sidecar_is_a_directory", expect_app=("module sidecar",))(
    lambda n, b: replace_file(n / SIDECAR, Path.mkdir)
)
case("sidecar_is_a_fifo", expect_app=("named pipe",))(lambda n, b: replace_file(n / SIDECAR, fifo))
case("sidecar_garbage", expect_app=("modules.jsonl line 1: not valid json",))(
    lambda n, b: (n / SIDECAR).write_bytes(b"\x00\xff[[[\n{}\n42\n")
)
case(
    "sidecar_nesting",
)(lambda n, b: (n / SIDECAR).write_bytes(b"[" * 100_000 + b"\n"))

# the call sidecar: read where a suspect blames a kernel (its keyword arguments); here the NPU's relu
# output differs while its input agrees, and the sidecar's second and third lines are cut and junk
RELU_OUT = entry_name("Functional_relu", 0, "forward", "output", (0,))


@case("calls_sidecar_cut_and_junk_lines", "calls.jsonl line 2: not valid json")
def _calls_junk(n: Path, b: Path) -> set[str]:
    good = encode_call_line(
        CallSpec(
            "Functional_relu_0",
            "torch.nn.functional.relu",
            [TensorArg(entry_name("Functional_relu", 0, "forward", "input", (0,)))],
        )
    )
    (n / CALLS_SIDECAR).write_text(good + '\n{"call": "Tensor_add_0", "fn": "torch.Ten\n{"call": 42}\n')
    np.save(npy(n, RELU_OUT), array_for(RELU_OUT) * 2)
    return {RELU_OUT}


# links: nothing that resolves outside the rank folder is read (a link inside it is)
OUTSIDE = "resolves outside the dump's folder"


def _link_out(case_dir: Path, path: Path, lost: set[str] | frozenset[str]) -> set[str]:
    """``path`` moved out of the dump (into the case's folder, beside its two sides) and linked to from
    where it was: the same bytes, so that a reader that followed the link would pass it unnoticed."""
    outside = case_dir / f"outside_{path.name}"
    shutil.move(path, outside)
    path.symlink_to(outside, target_is_directory=outside.is_dir())
    return set(lost)


def _sparse(path: Path, head: bytes, size: int) -> None:
    """``path`` as ``head`` followed by zeros up to ``size`` bytes, none of them on disk."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


case("npy_symlink_out_of_the_dump", OUTSIDE)(lambda n, b: _link_out(n.parents[3], npy(n, MID), {MID}))
case("npy_folder_symlink_out_of_the_dump", OUTSIDE)(lambda n, b: _link_out(n.parents[3], n / NPY, ALL))
case("pkl_symlink_out_of_the_rank_folder", OUTSIDE, cli_fails=True)(
    lambda n, b: _link_out(n.parents[3], n / PKL, ALL)
)
case("npy_symlink_inside_the_rank_folder")(  # another file of the same rank folder: followed
    lambda n, b: (shutil.move(npy(n, MID), n / "kept.npy"), npy(n, MID).symlink_to(n / "kept.npy"))
)

# npy headers that claim gigabytes: never read, nor their data
case("npy_header_length_4_gib", "more than an npy header's")(
    lambda n, b: lose(
        {MID}, _sparse(npy(n, MID), b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xF0000000), 1 << 32)
    )
)
case("npy_sparse_huge_shape", "holds shape [4, 6, 268435456]")(
    lambda n, b: lose({MID}, _sparse(npy(n, MID), npy_header((4, 6, 2**28)), 4 * 6 * 2**28 * 4 + 128))
)


# permissions (root reads everything: these run without the DAC capabilities)
DENIED = "permission denied"
case("pkl_unreadable", DENIED, privileged=True, cli_fails=True)(lambda n, b: lose(ALL, (n / PKL).chmod(0)))
case("rank_folder_unreadable", DENIED, privileged=True, cli_fails=True)(lambda n, b: lose(ALL, n.chmod(0)))
case("npy_folder_unreadable", DENIED, privileged=True)(lambda n, b: lose(ALL, (n / NPY).chmod(0)))
case("npy_file_unreadable", DENIED, privileged=True)(lambda n, b: lose({MID}, npy(n, MID).chmod(0)))
case("sidecar_unreadable", expect_app=("permission denied",), privileged=True)(
    lambda n, b: (n / SIDECAR).chmod(0)
)


# --- root cases: what the two paths point at --------------------------------------------------


def _pair(
    root: Path, npu: list[tuple[int | None, int]] = ((0, 0),), bench: list[tuple[int | None, int]] = ((0, 0),)
) -> tuple[Path, Path]:
    for side, ranks in (("npu", npu), ("bench", bench)):
        for step, rank in ranks:
            write_clean_rank(rank_dir_path(root / side, rank, step))
    return root / "npu", root / "bench"


def root_case(name: str, *expect: str, **kw: object) -> Callable[[Callable], Callable]:
    def add(fn: Callable) -> Callable:
        CASES.append(Case(name, tuple(e.lower() for e in expect), root=fn, **kw))
        return fn

    return add


@root_case("bench_path_typo", "no such file or directory", cli_fails=True)
def _typo(root: Path):
    n, b = _pair(root)
    return n, b.with_name("benchh"), {}


@root_case("npu_path_typo", "no such file or directory", cli_fails=True)
def _npu_typo(root: Path):
    n, b = _pair(root)
    return n.with_name("npuu"), b, {}


@root_case("bench_path_is_a_text_file", "not a .pkl file", cli_fails=True)
def _text_file(root: Path):
    n, _ = _pair(root)
    (root / "notes.txt").write_text("x")
    return n, root / "notes.txt", {}


@root_case("bench_path_empty_folder", "no dump found", cli_fails=True)
def _empty(root: Path):
    n, _ = _pair(root)
    (root / "empty").mkdir()
    return n, root / "empty", {}


@root_case("bench_path_is_a_fifo", "named pipe", cli_fails=True)
def _root_fifo(root: Path):
    n, _ = _pair(root)
    os.mkfifo(root / "pipe")
    return n, root / "pipe", {}


@root_case("step_without_pair", "pair up for step 5", cli_fails=True)
def _step(root: Path):
    n, b = _pair(root)
    return n, b, {"step": 5}


@root_case("rank_without_pair", "pair up for rank 3", cli_fails=True)
def _rank(root: Path):
    n, b = _pair(root, npu=[(0, 0), (0, 1)], bench=[(0, 0), (0, 1)])
    return n, b, {"rank": 3}


@root_case("extra_rank_on_npu", "npu step0/rank1: no bench dump")
def _extra_npu(root: Path):
    n, b = _pair(root, npu=[(0, 0), (0, 1)], bench=[(0, 0), (0, 2)])
    return n, b, {}


@root_case("extra_step_on_bench", "bench step1/rank0: no npu dump")
def _extra_bench(root: Path):
    n, b = _pair(root, npu=[(0, 0)], bench=[(0, 0), (1, 0)])
    return n, b, {}


@root_case("rank_folder_misnamed", "no dump found", cli_fails=True)
def _misnamed(root: Path):
    n, b = _pair(root)
    (b / "ptdbg_dump_v4.0" / "step0" / "rank0").rename(b / "ptdbg_dump_v4.0" / "step0" / "r0")
    return n, b, {}


@root_case("rank_folder_without_pkl", "no dump found", cli_fails=True)
def _no_pkl(root: Path):
    n, b = _pair(root)
    (b / "ptdbg_dump_v4.0" / "step0" / "rank0" / PKL).unlink()
    return n, b, {}


@root_case("empty_rank_folder_on_bench", "a rank folder without a dump file")
def _empty_rank(root: Path):
    n, b = _pair(root, npu=[(0, 0), (0, 1)], bench=[(0, 0)])
    (b / "ptdbg_dump_v4.0" / "step0" / "rank1").mkdir()
    return n, b, {}


@root_case("same_rank_twice_on_npu", "same step and rank")
def _same_rank(root: Path):
    n, b = _pair(root, npu=[(0, 0), (0, 1)], bench=[(0, 0), (0, 1)])
    shutil.copytree(n / "ptdbg_dump_v4.0" / "step0" / "rank1", n / "ptdbg_dump_v4.0" / "step0" / "rank01")
    return n, b, {}


@root_case("same_ranks_in_two_tag_folders_on_bench", "same step and rank")
def _two_tags(root: Path):
    n, b = _pair(root, npu=[(0, 0), (0, 1)], bench=[(0, 0), (0, 1)])
    shutil.copytree(b / "ptdbg_dump_v4.0", b / "ptdbg_dump_v3.0")
    return n, b, {}


def _msprobe(root: Path) -> tuple[Path, Path]:
    src = FIXTURES / "msprobe" / "tensor"
    for side in ("npu", "bench"):
        shutil.copytree(src / side, root / side)
    return root / "npu", root / "bench"


def _dump_json(side: Path) -> Path:
    return next(side.rglob("dump.json"))


@root_case("msprobe_dump_json_cut", "not complete json", msprobe=True, lost_limit=None)
def _ms_cut(root: Path):
    n, b = _msprobe(root)
    p = _dump_json(n)
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    return n, b, {}


@root_case("msprobe_dump_json_nesting", "nested too deeply", msprobe=True, lost_limit=None)
def _ms_deep(root: Path):
    n, b = _msprobe(root)
    _dump_json(n).write_text("[" * 100_000)
    return n, b, {}


@root_case("msprobe_dump_json_fifo", "named pipe", cli_fails=True, msprobe=True)
def _ms_fifo(root: Path):
    n, b = _msprobe(root)
    replace_file(_dump_json(n), fifo)
    return n, b, {}


def _first_data_name(root: Path, value: str):
    """An msprobe pair whose NPU dump.json gives its first tensor the data_name ``value`` (JSON text)."""
    n, b = _msprobe(root)
    p = _dump_json(n)
    text = p.read_text()
    first = text.index('"data_name": "') + len('"data_name": "')
    p.write_text(text[:first] + value + text[text.index('"', first) :])
    return n, b, {}


@root_case("msprobe_data_name_parent_dirs", "outside the dump folder", msprobe=True, lost_limit=8)
def _ms_dotdot(root: Path):
    return _first_data_name(root, "../../../../etc/hostname")


@root_case("msprobe_data_name_lone_surrogate", "lone utf-16 surrogate", msprobe=True, lost_limit=8)
def _ms_surrogate(root: Path):
    return _first_data_name(root, "x\\ud800.pt")


@root_case("msprobe_dump_json_without_data", "'data' object", msprobe=True, lost_limit=None)
def _ms_no_data(root: Path):
    n, b = _msprobe(root)
    _dump_json(n).write_text('{"task": "tensor", "level": "L1"}')
    return n, b, {}


@root_case("msprobe_pt_file_fifo", "named pipe", msprobe=True, lost_limit=1)
def _ms_pt_fifo(root: Path):
    n, b = _msprobe(root)
    replace_file(sorted(n.rglob("*.pt"))[0], fifo)
    return n, b, {}


def _first_pt(side: Path) -> Path:
    """The NPU dump's first tensor file (Functional.conv2d.0.forward.input.0.pt, shape [2, 3, 8, 8])."""
    return next(side.rglob("Functional.conv2d.0.forward.input.0.pt"))


def _rezip(path: Path, change: Callable[[str, bytes], bytes]) -> None:
    """A .pt rewritten with each member's bytes as ``change(name, data)`` makes them, stored."""
    with zipfile.ZipFile(path) as z:
        members = [(i.filename, z.read(i)) for i in z.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in members:
            z.writestr(name, change(name, data))


@root_case("msprobe_stack_json_nesting", "nested too deeply", msprobe=True, lost_limit=14)
def _ms_stack_deep(root: Path):
    """stack.json valid but nested beyond the parser's limit: the stacks are lost (the 14 rows that
    show one differ in NPU_Stack_Info alone), never the dump."""
    n, b = _msprobe(root)
    (_dump_json(n).parent / "stack.json").write_text(
        '{"0": [["Functional.conv2d.0.forward"], ' + "[" * 5000 + "]" * 5000 + "]}"
    )
    return n, b, {}


@root_case("msprobe_construct_json_nesting", expect_app=("nested too deeply",), msprobe=True)
def _ms_construct_deep(root: Path):
    n, b = _msprobe(root)
    (_dump_json(n).parent / "construct.json").write_text('{"a": ' + "[" * 5000 + "]" * 5000 + "}")
    return n, b, {}


@root_case("msprobe_construct_json_chain_100k_and_cycles", msprobe=True)
def _ms_construct_chain(root: Path):
    """Every call inside a 100k-deep chain of modules, beside a two-module cycle and a self-parent:
    chains are bounded and computed per call asked, never nodes × depth at load."""
    n, b = _msprobe(root)
    chain = {f"Module.m{i}.M.forward.0": f"Module.m{i + 1}.M.forward.0" for i in range(100_000)}
    chain |= {
        "Module.a.A.forward.0": "Module.b.B.forward.0",
        "Module.b.B.forward.0": "Module.a.A.forward.0",
        "Module.s.S.forward.0": "Module.s.S.forward.0",
    }
    calls = list(json.loads(_dump_json(n).read_text())["data"])
    for i, call in enumerate(calls):
        chain[call] = ("Module.m0.M.forward.0", "Module.a.A.forward.0", "Module.s.S.forward.0", call)[i % 4]
    (_dump_json(n).parent / "construct.json").write_text(json.dumps(chain))
    return n, b, {}


@root_case("msprobe_dump_json_utf8_bom", msprobe=True)
def _ms_bom(root: Path):
    """A byte order mark an editor added: not JSON's, but the dump is whole."""
    n, b = _msprobe(root)
    p = _dump_json(n)
    p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    return n, b, {}


@root_case("msprobe_pt_negative_stride", "impossible tensor", msprobe=True, lost_limit=1)
def _ms_pt_negative_stride(root: Path):
    n, b = _msprobe(root)
    stride = b"K\xc0K@K\x08K\x01"  # (192, 64, 8, 1) in the pickle; becomes (-192, 64, 8, 1)
    negative = b"J\x40\xff\xff\xffK@K\x08K\x01"
    _rezip(_first_pt(n), lambda name, data: data.replace(stride, negative) if name.endswith("pkl") else data)
    return n, b, {}


@root_case("msprobe_pt_storage_size_past_the_end", "the file holds", msprobe=True, lost_limit=1)
def _ms_pt_declared_size(root: Path):
    """The zip's directory declares a 4 GiB storage that the file does not hold."""
    n, b = _msprobe(root)
    p = _first_pt(n)
    data = bytearray(p.read_bytes())
    at = 0
    while (at := data.find(b"PK\x01\x02", at + 1)) >= 0:
        length = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46 : at + 46 + length].endswith(b"/data/0"):
            struct.pack_into("<LL", data, at + 20, 0xFFFFFFF0, 0xFFFFFFF0)  # compressed, uncompressed
    p.write_bytes(bytes(data))
    return n, b, {}


@root_case("msprobe_pt_expanded_by_stride_0_to_8_gb", "8 gb of memory", msprobe=True, lost_limit=1)
def _ms_pt_expanded(root: Path):
    """1.8 KB on disk: one stored element, a size of 2e9 and a stride of 0 (torch.save writes it so)."""
    n, b = _msprobe(root)
    pt = _first_pt(n)
    size = b"(K\x02K\x03K\x08K\x08t"  # (2, 3, 8, 8) in the pickle: becomes (2000000000,)
    stride = b"(K\xc0K@K\x08K\x01t"  # (192, 64, 8, 1): becomes (0,)
    _rezip(
        pt,
        lambda name, d: (
            d.replace(size, b"(J\x00\x94\x35\x77t").replace(stride, b"(K\x00t") if name.endswith("pkl") else d
        ),
    )
    return n, b, {}


@root_case("msprobe_pt_symlink_out_of_the_dump", OUTSIDE, msprobe=True, lost_limit=1)
def _ms_pt_link(root: Path):
    n, b = _msprobe(root)
    _link_out(root, _first_pt(n), set())
    return n, b, {}


@root_case("msprobe_dump_json_symlink_out_of_the_dump", OUTSIDE, msprobe=True, cli_fails=True)
def _ms_json_link(root: Path):
    n, b = _msprobe(root)
    _link_out(root, _dump_json(n), set())
    return n, b, {}


@root_case("same_dump_on_both_sides", "same file", lost_limit=None)
def _same_dump(root: Path):
    """One folder given twice: every row passes, and the user is told why."""
    n, _ = _pair(root)
    return n, n, {}


# --- building ---------------------------------------------------------------------------------


@dataclass
class Built:
    """A case on disk: the two paths, options, and the entries its damage may cost."""

    case: Case
    npu: Path
    bench: Path
    options: dict[str, object] = field(default_factory=dict)
    lost: frozenset[str] = frozenset()
    rank: int | None = None  # its rank in the multi-rank pair of the app session


@dataclass
class Corpus:
    clean: tuple[Path, Path]  # an undamaged pair of single-rank dumps
    msprobe: tuple[Path, Path]  # an undamaged msprobe pair
    built: dict[str, Built]
    ranks: tuple[Path, Path]  # every unprivileged rank case as one rank of one pair
    privileged_ranks: tuple[Path, Path]


def _build(tmp: Path) -> Corpus:
    clean = _pair(tmp / "clean")
    msprobe = _msprobe(tmp / "clean_msprobe")
    built: dict[str, Built] = {}
    for number, c in enumerate(CASES):
        where = tmp / c.name
        if c.root is not None:
            n, b, options = c.root(where)
            built[c.name] = Built(c, n, b, options)
            continue
        n, b = (rank_dir_path(where / side, 0, 0) for side in ("npu", "bench"))
        write_clean_rank(n)
        write_clean_rank(b)
        lost = c.damage(n, b)
        lost = lost if isinstance(lost, (set, frozenset)) else set()
        built[c.name] = Built(c, where / "npu", where / "bench", lost=frozenset(lost), rank=number)
    multi = []
    for privileged in (False, True):
        top = tmp / ("multi_privileged" if privileged else "multi")
        for side in ("npu", "bench"):
            for b in built.values():
                if b.rank is not None and b.case.privileged == privileged:
                    link = rank_dir_path(top / side, b.rank, 0)
                    link.parent.mkdir(parents=True, exist_ok=True)
                    link.symlink_to(rank_dir_path(getattr(b, side), 0, 0), target_is_directory=True)
        multi.append((top / "npu", top / "bench"))
    return Corpus(clean, msprobe, built, multi[0], multi[1])


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Iterator[Corpus]:
    tmp = tmp_path_factory.mktemp("corpus")
    built = _build(tmp)
    yield built
    for path in tmp.rglob("*"):  # let pytest remove what the permission cases locked
        with contextlib.suppress(OSError):
            if not path.is_symlink():
                path.chmod(0o700)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" in metafunc.fixturenames:
        metafunc.parametrize("case", CASES, ids=[c.name for c in CASES])


# --- dropping root's power to read everything -------------------------------------------------


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_CAP_V3 = 0x20080522
_DAC = (1 << 1) | (1 << 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH


@contextlib.contextmanager
def without_dac() -> Iterator[None]:
    """File permissions hold for this thread (and threads it starts) as for any user."""
    if os.geteuid() != 0:
        yield
        return
    libc = ctypes.CDLL(None, use_errno=True)
    header, saved = _CapHeader(_CAP_V3, 0), (_CapData * 2)()
    if libc.capget(ctypes.byref(header), saved) != 0:
        pytest.skip(f"capget failed ({os.strerror(ctypes.get_errno())}): cannot drop root's DAC override")
    dropped = (_CapData * 2)(*saved)
    dropped[0].effective &= ~_DAC
    if libc.capset(ctypes.byref(header), dropped) != 0:
        pytest.skip(f"capset failed ({os.strerror(ctypes.get_errno())}): cannot drop root's DAC override")
    try:
        yield
    finally:
        libc.capset(ctypes.byref(header), saved)


@pytest.fixture
def dropped_dac() -> Callable[[], contextlib.AbstractContextManager[None]]:
    """:func:`without_dac`, for the test modules (a conftest cannot be imported)."""
    return without_dac


@pytest.fixture
def clean_rank_writer() -> Callable[[Path], None]:
    """:func:`write_clean_rank`, for the test modules."""
    return write_clean_rank
