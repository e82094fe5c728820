"""Widgets that draw dump text literally: never a control character on the terminal.

rich and Textual strip only BEL, BS, VT, FF and CR from the text they draw: an ESC in a dump's name or
stack text (an OSC 0 that sets the terminal's title, an OSC 52 that sets its clipboard, a CSI that
clears the screen), a C1 control or a bidi override would reach the terminal as it is. Every line a
:class:`Literal` widget draws has them replaced by U+FFFD (:func:`~ptdbg_tui.formats.untrusted.replaced`),
whatever text built it; markup is a separate matter (dump text is given as rich ``Text``, never as a
markup string, docs/security.md).
"""

from __future__ import annotations

from rich.segment import Segment
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import DataTable, Label, Static

from ptdbg_tui.formats.untrusted import has_control, replaced


def literal_strip(strip: Strip) -> Strip:
    """``strip`` with the control characters of its text replaced, at its width (the same strip when,
    as nearly always, there are none)."""
    if not any(not s.control and has_control(s.text) for s in strip):
        return strip
    fixed = [s if s.control else Segment(replaced(s.text), s.style) for s in strip]
    return Strip(fixed).adjust_cell_length(strip.cell_length)


class Literal:
    """A widget mixin (first among the bases): each drawn line through :func:`literal_strip`."""

    def render_lines(self, crop: Region) -> list[Strip]:
        return [literal_strip(s) for s in super().render_lines(crop)]  # type: ignore[misc]


class LiteralStatic(Literal, Static):
    """A Static that shows dump text."""


class LiteralLabel(Literal, Label):
    """A Label that shows dump text."""


class LiteralTable(Literal, DataTable[object]):
    """A DataTable that shows dump text."""
