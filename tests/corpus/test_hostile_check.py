"""Hostile dump text in every slot of ``ptdbg-tui check``'s report: each line stays one line, without a
control character or a bidi override (docs/security.md)."""

from __future__ import annotations

import pytest

from ptdbg_tui.compare.diagnosis.nonfinite import (
    NonFinite,
    NonFiniteOrigin,
    OriginKind,
    OriginReplay,
    Overflow,
)
from ptdbg_tui.compare.diagnosis.replay_reasons import Failed
from ptdbg_tui.compare.report.words import check_lines
from ptdbg_tui.formats.records import BadLine, Frame, StackRecord
from ptdbg_tui.formats.unreadable import InEntry, Raised
from tests.corpus.hostile import HOSTILE, RAW_CONTROL


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("kind", list(OriginKind))
def test_every_slot_of_the_check_report_is_one_printable_line(text, kind):
    frame = Frame(text, text, text, text)
    origin = NonFiniteOrigin(
        call=text,
        direction="forward",
        kind=kind,
        found=[NonFinite(text, text, 1, 2), NonFinite(text, text, stats=(("max", float("inf")),))],
        stack=StackRecord(f"{text}_stack_info", [frame]),
        module=text,
        not_replayed=Failed(error=text, message=text),
    )
    lines = check_lines(text, origin, [BadLine(1, InEntry(entry=text, why=Raised(error=text)), text)])
    lines += check_lines(text, None)
    origin.replay = OriginReplay(Overflow.OVERFLOW, text, text, 1e5, None)
    lines += check_lines(text, origin)
    for line in lines:
        assert "\n" not in line and RAW_CONTROL.search(line) is None, repr(line)
