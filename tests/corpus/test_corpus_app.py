"""Every damaged input through the app, headless: the rank cases as the ranks of one pair in one
session (the privileged ones in a second, without root's DAC override), each root case in its own.
No exception, the engine never stops, a message naming the problem in the app's own texts, and
every row the damage did not touch compared as on the clean dump."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import pytest

from ptdbg_tui.app.app import PtdbgApp
from ptdbg_tui.compare.model import Status
from ptdbg_tui.compare.report.words import side_notice_text, unpaired_text
from ptdbg_tui.engine.batch import compare_dumps
from ptdbg_tui.engine.live.options import LiveOptions

WAIT_S = 240.0  # a ceiling, as tests/app/conftest.py: a loaded box starves the app's replay worker
SIZE = (140, 40)
#: What only a fault of the engine itself would say.
ENGINE_FAULTS = ("engine stopped", "unexpected error", "traceback", "comparing failed")


def shown(bar) -> str:
    """What a bar of the app shows now, as plain text."""
    return "\n".join(line.plain for line in bar.lines)


class Session:
    """One app run: what it noticed and shows, and the engine's rows per pair."""

    def __init__(self, npu: Path, bench: Path, **options: object) -> None:
        self.app = PtdbgApp(npu, bench, LiveOptions(watch=False, jobs=1, **options))
        self.notices: list[str] = []
        notify = self.app.notify

        def record(message: str, **kw: object) -> None:
            self.notices.append(message)
            notify(message, **kw)

        self.app.notify = record  # type: ignore[method-assign]

    async def run(self) -> None:
        app = self.app
        async with app.run_test(size=SIZE) as pilot:
            deadline = time.monotonic() + WAIT_S
            while not (app.model.progress.done and app.settled):
                assert time.monotonic() < deadline, "the app did not settle"
                await pilot.pause(0.02)
            await pilot.press("down", "down", "down", "enter", "down", "down")  # the detail panel too
            self.shown = [shown(app.header_bar), shown(app.diagnosis_bar)]
            p = app.model.progress
            self.shown += [*map(unpaired_text, p.unpaired), *p.faults] + [
                q for s in (p.npu, p.bench) if s for q in s.problems
            ]
            self.shown += [said for s in (p.npu, p.bench) if s and (said := side_notice_text(s))]
            self.pairs = {info.npu.rank: rows for info, rows in app.engine.pairs()}

    def texts(self, rank: int | None = None) -> str:
        """Everything the app said, or what it said about one rank (its pair's rows included)."""
        said = self.notices + self.shown
        if rank is not None:
            said = [t for t in said if re.search(rf"rank{rank}\b", t)]
            said += [r.result.message for r in self.pairs.get(rank, []) if r.result]
        else:
            said += [r.result.message for rows in self.pairs.values() for r in rows if r.result]
        return "\n".join(said).lower()

    def statuses(self, rank: int | None) -> dict[str, list[Status]]:
        rows = self.pairs.get(rank, []) if rank is not None else next(iter(self.pairs.values()), [])
        found: dict[str, list[Status]] = {}
        for r in rows:
            found.setdefault(r.name if r.npu is not None else "bench:" + r.name, []).append(r.status)
        return found


def _clean(outcome_rows) -> dict[str, Status]:
    return {(r.name if r.npu is not None else "bench:" + r.name): r.status for r in outcome_rows}


@pytest.fixture(scope="module")
def clean_statuses(corpus) -> dict[str, dict[str, Status]]:
    """Each row's status on the clean pairs (the engine and the batch compare agree on them)."""
    return {
        name: _clean(compare_dumps(*pair, jobs=1, summary=summary)[0].rows)
        for name, pair, summary in (
            ("ptdbg", corpus.clean, False),
            ("summary", corpus.clean, True),
            ("msprobe", corpus.msprobe, False),
        )
    }


def _check(session: Session, built, clean: dict[str, Status], rank: int | None) -> list[str]:
    """What is wrong with one case's showing in the app ([] when all is well)."""
    case = built.case
    problems = []
    said = session.texts(rank)
    if case.app_expect and not any(e in said for e in case.app_expect):
        problems.append(f"{case.name}: none of {case.app_expect} in {said[:400]!r}")
    if built.case.cli_fails and rank is None:
        return problems
    statuses = session.statuses(rank)
    limit = 0 if rank is not None else case.lost_limit
    differ = [n for n, s in clean.items() if n not in built.lost and s not in statuses.get(n, [])]
    if limit is not None and len(differ) > limit:
        problems.append(
            f"{case.name}: rows not compared as on the clean dump: {differ[:4]} "
            f"{[statuses.get(n) for n in differ[:4]]}"
        )
    return problems


def _no_engine_fault(session: Session, caplog) -> None:
    said = session.texts()
    assert not any(f in said for f in ENGINE_FAULTS), said
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("ptdbg_tui")]
    assert not errors, [r.getMessage() for r in errors]


def _rank_cases(corpus, privileged: bool) -> list:
    return [b for b in corpus.built.values() if b.rank is not None and b.case.privileged == privileged]


@pytest.mark.timeout(300)
async def test_app_rank_cases_in_one_session(corpus, clean_statuses, caplog):
    session = Session(*corpus.ranks)
    await session.run()
    _no_engine_fault(session, caplog)
    problems = []
    for built in _rank_cases(corpus, privileged=False):
        clean = clean_statuses["summary" if built.case.summary else "ptdbg"]
        problems += _check(session, built, clean, built.rank)
    assert not problems, "\n".join(problems)


@pytest.mark.timeout(300)
async def test_app_permission_cases_in_one_session(corpus, clean_statuses, caplog, dropped_dac):
    with dropped_dac():
        session = Session(*corpus.privileged_ranks)
        await session.run()
    _no_engine_fault(session, caplog)
    problems = []
    for built in _rank_cases(corpus, privileged=True):
        problems += _check(session, built, clean_statuses["ptdbg"], built.rank)
    assert not problems, "\n".join(problems)


@pytest.mark.timeout(300)
async def test_app_root_cases(corpus, clean_statuses, caplog):
    """Each in its own session: what the two paths are is what the app must explain."""
    problems = []
    for built in corpus.built.values():
        if built.case.root is None:
            continue
        session = Session(built.npu, built.bench, **built.options)
        await session.run()
        _no_engine_fault(session, caplog)
        problems += _check(session, built, clean_statuses["msprobe" if built.case.msprobe else "ptdbg"], None)
        if built.case.cli_fails:  # nothing compared: never an all-clear
            assert "no operator introduces" not in session.texts(), built.case.name
    assert not problems, "\n".join(problems)
