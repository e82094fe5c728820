"""The error chart draws any error a diagnosis holds: a suspect whose output shape differs has an
infinite error, and the app died drawing it (``OverflowError: cannot convert float infinity to
integer`` in ``log_axis``) the moment ``c`` selected it."""

from __future__ import annotations

import math

from textual.app import App, ComposeResult

from ptdbg_tui.app.charts import ERROR_CEILING, ErrorChart, ErrorSeries, log_error


def test_an_error_no_number_measures_is_drawn_at_the_ceiling():
    top = math.log10(ERROR_CEILING)
    assert log_error(math.inf) == log_error(math.nan) == top
    assert log_error(0.0) == -12 and log_error(1e-3) == -3


class _Chart(App[None]):
    def compose(self) -> ComposeResult:
        yield ErrorChart(id="along")


async def test_a_suspect_with_an_infinite_error_is_drawn():
    series = ErrorSeries(errors=[1e-7, 2e-3, math.inf, math.nan, None, 0.5], suspects=frozenset({2, 3}))
    app = _Chart()
    async with app.run_test(size=(100, 20)) as pilot:
        chart = app.query_one(ErrorChart)
        chart.draw(series, selected=2)
        await pilot.pause()
        assert chart.display
        assert app.return_code is None and app.is_running
