"""The dump daemon: a killed job keeps every line it wrote, a full disk stops only the dumping."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from dumper import PrecisionDebugger
from dumper.daemon import CallRecord, DumpDaemon
from ptdbg_tui.formats.calls import CallFollower, calls_path
from ptdbg_tui.formats.layout import discover
from ptdbg_tui.formats.npy import load_npy, npy_path
from ptdbg_tui.formats.pkl import PklFollower, read_pkl
from ptdbg_tui.formats.writer import RankWriter

from .conftest import make_inputs, train_step

DUMP_DIR = "ptdbg_dump_v4.0/rank0/api_stack_dump"
CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from conftest import make_inputs, train_step
    from dumper import PrecisionDebugger

    debugger = PrecisionDebugger(dump_path={path!r})
    debugger.start()
    model, x, target = make_inputs()
    while True:  # dumps until killed
        train_step(model, x, target)
""")


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)  # polling a file another process writes; the condition is what we wait on


def _lines(pkl: Path) -> int:
    try:
        return pkl.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_a_killed_dumping_process_leaves_every_written_line_with_its_npy(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(tests=str(Path(__file__).parent), path=str(tmp_path / "dump")))
    pkl = tmp_path / "dump" / "ptdbg_dump_v4.0" / "rank0" / "api_stack_dump.pkl"
    child = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: _lines(pkl) >= 400 or child.poll() is not None, 120, "the child's pkl lines")
        assert child.poll() is None, child.stderr.read().decode()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        child.stderr.close()
    batch = PklFollower(pkl).read()  # complete lines only, as a live reader sees them
    assert not batch.bad and len(batch.tensors) >= 300
    tensor_dir = pkl.with_suffix("")
    for rec in batch.tensors:
        array = load_npy(npy_path(tensor_dir, rec.name))
        assert rec.is_scalar or array.shape == rec.shape, rec.name
    assert not any(".tmp" in r.name for r in batch.tensors)
    calls = CallFollower(calls_path(pkl))  # the call sidecar: complete lines only, each before its pkl line
    calls.read()
    assert calls.bad_lines == 0 and {r.entry.label for r in batch.tensors} <= set(calls.specs)
    text = calls_path(pkl).read_bytes()
    assert all(json.loads(line) for line in text[: text.rfind(b"\n")].split(b"\n"))


def test_a_full_disk_stops_dumping_once_and_training_goes_on(tmp_path: Path, monkeypatch, caplog) -> None:
    real_save = RankWriter.save_npy
    saved, refused = [], []

    def save_until_full(self, name, array):
        if len(saved) >= 20:
            refused.append(name)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.npy_dir / f"{name}.npy"))
        saved.append(name)
        return real_save(self, name, array)

    monkeypatch.setattr(RankWriter, "save_npy", save_until_full)
    model, x, target = make_inputs()
    debugger = PrecisionDebugger(dump_path=str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="dumper"):
        debugger.start()
        losses = [train_step(model, x, target).item() for _ in range(3)]
        debugger.stop()
        debugger.start()  # refused with one more line, still no exception
        debugger.stop()
    assert len(losses) == 3
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "Dumping stopped; the training continues" in errors[0]
    assert f"the disk is full: cannot write {tmp_path}" in errors[0]
    assert " free on its file system" in errors[0]
    assert any("not dumping" in m for m in caplog.messages)
    (dump,) = discover(tmp_path)
    written = [r.name for r in read_pkl(dump.records).tensors]
    assert refused == [refused[0]] and refused[0] not in written and len(written) >= 20
    assert sorted(written) == sorted(p.stem for p in dump.tensor_dir.glob("*.npy"))  # each line has its npy


FULL_AND_LOCKED = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from conftest import make_inputs, train_step
    from dumper import PrecisionDebugger

    model, x, target = make_inputs()
    for path in ("locked/dump", "full/dump"):
        debugger = PrecisionDebugger(dump_path=path)
        debugger.start()
        losses = [train_step(model, x, target).item() for _ in range(3)]
        debugger.stop()
        print("trained", len(losses), flush=True)

    from ptdbg_tui.formats.layout import discover  # the tmpfs goes with the namespace: look now
    from ptdbg_tui.formats.pkl import read_pkl

    (dump,) = discover("full/dump")
    written = sorted(r.name for r in read_pkl(dump.records).tensors)
    print(written == sorted(p.stem for p in dump.tensor_dir.glob("*.npy")), len(written),
          len(list(dump.tensor_dir.glob(".*"))))
""")
#: In a user and mount namespace: a 64 KiB tmpfs, a folder nobody may write, and the child without
#: root's DAC override (so that the folder's mode holds for it).
NAMESPACE = (
    "mkdir full locked && mount -t tmpfs -o size=64k tmpfs full && chmod 555 locked && exec setpriv "
    '--inh-caps=-all --bounding-set=-dac_override,-dac_read_search "$0" child.py'
)


def test_a_real_full_disk_and_a_folder_without_permission_say_so(tmp_path: Path) -> None:
    probe = subprocess.run(
        [
            "unshare",
            "-Urm",
            "sh",
            "-c",
            "mount -t tmpfs tmpfs /mnt && setpriv --bounding-set=-dac_override true",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe.returncode != 0:
        pytest.skip(f"no user/mount namespace with a tmpfs here: {probe.stderr.strip()}")
    (tmp_path / "child.py").write_text(FULL_AND_LOCKED.format(tests=str(Path(__file__).parent)))
    child = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", NAMESPACE, sys.executable],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = child.stdout.splitlines()
    assert child.returncode == 0 and lines[:2] == ["trained 3"] * 2, child.stderr
    errors = [line for line in child.stderr.splitlines() if "Dumping stopped" in line]
    assert len(errors) == 2 and "Traceback" not in child.stderr, child.stderr
    locked, full = errors
    # the dump path as given (locked/dump), made absolute when given
    assert locked.startswith(f"dumper: permission denied: cannot write {tmp_path}/locked/dump"), locked
    assert "free on its file system" in locked
    assert f"the disk is full: cannot write {tmp_path}/full/dump/{DUMP_DIR}" in full, full
    assert "(0 bytes free on its file system)" in full, full
    consistent, written, partial = lines[2].split()  # what fitted is a valid dump: each line has its npy
    assert consistent == "True" and int(written) > 0 and partial == "0", lines[2]


def test_stop_waits_for_the_daemon(tmp_path: Path) -> None:
    big = torch.randn(512, 512)
    debugger = PrecisionDebugger(dump_path=str(tmp_path))
    debugger.start()
    for _ in range(20):
        torch.relu(big)
    debugger.stop()  # returns only once all of it is on disk
    (dump,) = discover(tmp_path)
    recs = read_pkl(dump.records).tensors
    assert len(recs) == 40 and all(Path(npy_path(dump.tensor_dir, r.name)).is_file() for r in recs)


def test_the_queue_is_bounded(tmp_path: Path) -> None:
    daemon = DumpDaemon(max_items=1, max_bytes=1 << 40)
    daemon.open(tmp_path / "rank0", "api_stack", summary_only=True, fresh=True)
    gate = threading.Event()
    real = daemon._handle

    def held(item):
        if isinstance(item, CallRecord) and item.stack[0] == "a_stack_info":
            gate.wait(30)
        real(item)

    daemon._handle = held
    daemon.put(CallRecord(stack=("a_stack_info", [])))
    with daemon._cv:  # the daemon holds "a"; the queue is empty again
        assert daemon._cv.wait_for(lambda: not daemon._queue, 30)
    daemon.put(CallRecord(stack=("b_stack_info", [])))  # fills the queue
    blocked = threading.Thread(target=daemon.put, args=(CallRecord(stack=("c_stack_info", [])),))
    blocked.start()
    blocked.join(0.3)
    assert blocked.is_alive()  # the producer waits while the queue is full
    gate.set()
    blocked.join(30)
    assert not blocked.is_alive() and daemon.shutdown(30)
    assert [s.name for s in read_pkl(tmp_path / "rank0" / "api_stack_dump.pkl").stacks] == [
        "a_stack_info",
        "b_stack_info",
        "c_stack_info",
    ]


def _debug_run(tmp_path: Path, caplog, steps: int = 2) -> list[logging.LogRecord]:
    model, x, target = make_inputs()
    debugger = PrecisionDebugger(dump_path=str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="dumper"):
        debugger.start()
        for _ in range(steps):
            train_step(model, x, target)
        debugger.stop()
    return [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_numpys_short_write_on_a_nearly_full_disk_says_disk_full(tmp_path: Path, monkeypatch, caplog) -> None:
    def short_write(f, array, allow_pickle=False):
        f.write(b"\x93NUMPY")
        raise OSError("1024 requested and 992 written")  # what numpy's tofile raises, without errno

    monkeypatch.setattr(np, "save", short_write)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10 << 30, 10 << 30, 992))
    (error,) = _debug_run(tmp_path, caplog)
    message = error.getMessage()
    assert message.startswith(f"dumper: the disk is full: cannot write {tmp_path}")
    assert ".npy (992 bytes free" in message
    assert not list(tmp_path.rglob("*.tmp"))  # the partial file is gone


def test_permission_denied_says_so_with_the_path(tmp_path: Path, monkeypatch, caplog) -> None:
    def refuse(self, name, array):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self.npy_dir / f"{name}.npy"))

    monkeypatch.setattr(RankWriter, "save_npy", refuse)
    (error,) = _debug_run(tmp_path, caplog)
    assert f"permission denied: cannot write {tmp_path}" in error.getMessage()
    assert f"user id {os.getuid()} needs write access to " in error.getMessage()


def test_a_writer_bug_is_logged_once_with_a_count(tmp_path: Path, monkeypatch, caplog) -> None:
    def broken(self, name, frames):
        raise ValueError("a bug in the writer")

    monkeypatch.setattr(RankWriter, "write_stack", broken)
    errors = _debug_run(tmp_path, caplog, steps=3)
    assert len(errors) == 2, [e.getMessage() for e in errors]
    assert errors[0].exc_info is not None and "the same error again is counted" in errors[0].getMessage()
    count = int(errors[1].getMessage().split("skipped ")[1].split()[0])
    assert count > 10 and "ValueError: a bug in the writer" in errors[1].getMessage()
