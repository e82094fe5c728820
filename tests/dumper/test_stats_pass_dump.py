"""The statistics rows settled over a whole pair equal the one-by-one results on the project's own
dumper's statistics dumps of a real model with a faulty LSTM backward."""

from __future__ import annotations

import pytest

from tests.compare.test_stats_pass import check_same, matched_rows


def test_batch_equals_one_by_one_on_our_statistics_dump(dump_model, monkeypatch: pytest.MonkeyPatch) -> None:
    npu = dump_model("npu", fault=True, summary_only=True)
    bench = dump_model("bench", summary_only=True)
    assert check_same(matched_rows(npu, bench), monkeypatch) > 0
