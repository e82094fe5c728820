"""The call tree widget: a lazy window onto :class:`~ptdbg_tui.app.tree_model.TreeModel`.

TreeNodes exist only for expanded parents, created on expand in chunks of :data:`CHUNK`
with a "… N more" leaf for the rest. Result batches refresh the materialised nodes whose state
changed (one line each) and re-sync the children of expanded parents whose membership changed.
Labels are drawn from the model at render time, so a status change needs no ``set_label``.
"""

from __future__ import annotations

import itertools
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import on
from textual.binding import Binding, BindingType
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from ptdbg_tui.app.detail import NEUTRAL, not_compared, one_side_text, short_dtype
from ptdbg_tui.app.literal import Literal
from ptdbg_tui.app.tree_model import NAMED, Node, TreeModel
from ptdbg_tui.compare.model import Status
from ptdbg_tui.compare.report.words import suspect_name
from ptdbg_tui.engine.callpath import frame_site
from ptdbg_tui.formats.sites import stack_site

#: Children created per expand (and per "… more" selection).
CHUNK = 500
MIN_LABEL = 12  # cells a label keeps however deep its line
MIN_NAME = 4  # cells a name keeps when a line is cut to its width


class More:
    """Data of the "… N more" (or "… N earlier") leaf of a parent whose children are not all shown."""

    __slots__ = ("earlier", "hidden", "parent")

    def __init__(self, parent: Node, hidden: int, earlier: bool = False) -> None:
        self.parent = parent
        self.hidden = hidden
        self.earlier = earlier


def _fit(room: int, head: int, dot: bool, name: Text, extras: list[tuple[int, str]], tag: str) -> bool:
    """Make a line fit ``room`` cells: the extras go, the least important first (a tagged call's dot
    before those of rank 0), then the name is cut; never the tag. Returns whether the dot stays."""

    def width() -> int:
        parts = " · ".join(text for _, text in extras)
        return head + 2 * dot + name.cell_len + (len(parts) + 2 if parts else 0) + len(tag)

    def shed(least: int) -> None:
        while width() > room and any(r >= least for r, _ in extras):
            extras.pop(max(range(len(extras)), key=lambda i: (extras[i][0], i)))

    shed(1)
    if width() > room and tag:
        dot = False  # the tag says more than the dot that leads to it
    shed(0)
    if width() > room:
        name.truncate(max(MIN_NAME, name.cell_len - (width() - room)), overflow="ellipsis")
    return dot


class CallTree(Literal, Tree[object]):
    """Tree of API calls coloured by status; ``flat`` lists calls in execution order instead."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *(f"call-tree--{s.value}" for s in Status),
        "call-tree--extra",
        "call-tree--more",
        "call-tree--match",
        "call-tree--neutral",
    }
    DEFAULT_CSS = """
    CallTree > .call-tree--pass { color: $text-success; }
    CallTree > .call-tree--fail { color: $text-error; text-style: bold; }
    CallTree > .call-tree--warn { color: $text-warning; }
    CallTree > .call-tree--error { color: $text-status-error; text-style: bold; }
    CallTree > .call-tree--unmatched { color: $text-muted; text-style: dim; }
    CallTree > .call-tree--pending { }
    CallTree > .call-tree--extra { color: $text-muted; }
    CallTree > .call-tree--more { color: $text-muted; text-style: italic; }
    CallTree > .call-tree--match { background: $warning 40%; text-style: bold; }
    CallTree > .call-tree--neutral { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("h", "collapse_or_parent", "Collapse", show=False),
        Binding("l", "expand_or_child", "Expand", show=False),
        Binding("left", "collapse_or_parent", "Collapse", show=False),
        Binding("right", "expand_or_child", "Expand", show=False),
        Binding("g,home", "scroll_home", "Top", show=False),
        Binding("G,end", "scroll_end", "Bottom", show=False),
    ]

    def __init__(self, model: TreeModel, *, id: str | None = None) -> None:
        super().__init__("calls", id=id)
        self.model = model
        self.show_root = False
        self.guide_depth = 3
        self.flat = False
        self.highlight = ""  # the search text, marked in the labels
        self._tnodes: dict[int, TreeNode[object]] = {}
        self._windows: dict[int, tuple[int, int]] = {}  # shown slice of a parent's visible children
        self._top: Node = model.root

    # -- labels --------------------------------------------------------------------------------
    # The TreeNodes carry empty labels: each line is drawn from the model when it is rendered (a
    # status change needs no set_label), fitted to the width the line has.
    def process_label(self, label: str | Text) -> Text:
        return Text(label) if isinstance(label, str) else label  # dump names are never markup

    def get_label_width(self, node: TreeNode[object]) -> int:
        data = node.data
        estimate = (len(data.label) if isinstance(data, Node) else 30) + 18  # rendering every label costs
        return min(estimate, self._room(node))

    def render_label(self, node: TreeNode[object], base_style: Style, style: Style) -> Text:
        arrow = super().render_label(node, base_style, style)  # the clickable arrow: the label is empty
        label = self._label(node.data, self._room(node))
        label.stylize(style)
        return Text.assemble(arrow, label)

    def _room(self, node: TreeNode[object]) -> int:
        """The cells a line's label has: the tree's width less the line's guides and arrow."""
        depth = -1  # the root is not shown
        parent = node.parent
        while parent is not None:
            depth += 1
            parent = parent.parent
        arrow = len(self.ICON_NODE) if node.allow_expand else 0
        return max(MIN_LABEL, self.scrollable_content_region.width - self.guide_depth * depth - arrow)

    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(f"call-tree--{name}", partial=True)

    def _label(self, data: object, room: int | None = None) -> Text:
        """A line's text: state, name, extras, suspect tag; within ``room`` cells the extras go, the
        least important first (a tagged call's dot before those of rank 0), then the name is cut;
        never the tag."""
        if isinstance(data, More):
            what = "earlier" if data.earlier else "more"
            return Text(f"… {data.hidden:,} {what} — Enter to show", style=self._style("more"))
        if not isinstance(data, Node):
            return Text(str(data))
        status = data.worst
        style = self._style(status.value)
        symbol = status.symbol
        if data.is_leaf and data.row is not None and not_compared(data.row):
            style, symbol = self._style(NEUTRAL), "·"
        elif data.kind == "pair" and not data.total:  # no ✔ without a row: not read yet, or empty
            done = data.key in self.model.diagnoses
            style = self._style(NEUTRAL if done else Status.PENDING.value)
            symbol = "·" if done else Status.PENDING.symbol
        head = Text.assemble((f"{symbol} ", style))
        # as the error chart's red dots: what the diagnosis names, its entries (they may pass the
        # original's thresholds) and the branches down to it
        dot = self.model.named(data)
        name = Text(data.label, style=style if data.is_leaf else "")
        extras = self._extras(data)
        rank = self.model.suspect_rank(data) if data.kind == "call" else None
        # its entries may all pass the thresholds: the diagnosis says otherwise
        tag = "" if rank is None else f"  ◀ {suspect_name(rank)}"
        if room is not None:
            dot = _fit(room, head.cell_len, dot, name, extras, tag)
        if dot:
            head.append(f"{NAMED} ", style=self._style("fail"))
        text = head + name
        if extras:
            text.append(f"  {' · '.join(t for _, t in extras)}", style=self._style("extra"))
        text.append(tag, style=self._style("fail"))
        if room is not None:
            text.truncate(room, overflow="ellipsis")
        if self.highlight:
            text.highlight_words([self.highlight], self._style("match"), case_sensitive=False)
        return text

    def _extras(self, n: Node) -> list[tuple[int, str]]:
        """What a line shows after the name, in order, each with its rank (the highest goes first when
        the line is too long)."""
        if n.is_leaf:
            row = n.row
            if row is None:
                return []
            rec = row.record
            shape = list(rec.shape) if not rec.is_scalar else "scalar"
            parts = [(2, f"{short_dtype(rec.dtype)} {shape}")]
            alone = one_side_text(row)
            if alone:
                parts.append((0, alone))
            return parts
        parts = []
        if self.flat and n.kind == "call":
            first = next((c.row for c in n.children if c.row is not None), None)
            if first is not None and first.record.entry is not None:  # no direction branch in flat view
                parts.append((0, first.record.entry.direction))  # the name is the same both ways
            site = stack_site(n.site)
            if site is not None:
                parts.append((3, frame_site(site)))
        fails = n.count(Status.FAIL)
        if fails:
            parts.append((1, f"{fails} fail"))
        parts.append((4, f"{n.total:,}"))
        return parts

    # -- structure -----------------------------------------------------------------------------
    def view_top(self) -> Node:
        pairs = self.model.root.children
        return pairs[0] if len(pairs) == 1 else self.model.root

    def view_children(self, node: Node) -> list[Node]:
        if node.kind == "pair":  # its rows are placed when first shown
            self.model.place(node.key)
        if self.flat and node.kind == "pair":
            return self.model.flat.get(node.key, [])
        return node.children

    def view_parent(self, node: Node) -> Node | None:
        if self.flat and node.kind == "call":
            return self.model.root.child(node.pair)
        return node.parent

    def rebuild(self) -> None:
        """Re-create the materialised part from the model (top level changed, filter, view)."""
        cursor = self.cursor_model_node
        expanded = [t.data for t in self._tnodes.values() if t.is_expanded and isinstance(t.data, Node)]
        self.clear()
        self._tnodes.clear()
        self._windows.clear()
        self._top = self.view_top()
        self._tnodes[self._top.id] = self.root
        self.root.data = self._top
        self._sync(self._top)
        for n in sorted(expanded, key=lambda n: len(list(n.ancestors()))):
            t = self._tnodes.get(n.id)
            if t is not None and n.alive:
                self._sync(n)
                t.expand()
        if cursor is not None and cursor.alive and self.model.visible(cursor):
            self.reveal(cursor)

    @property
    def cursor_model_node(self) -> Node | None:
        node = self.cursor_node
        if node is None:
            return None
        data = node.data
        return data.parent if isinstance(data, More) else data if isinstance(data, Node) else None

    def apply_changes(self) -> set[Node]:
        """Bring the materialised nodes up to date with the model's recorded changes.

        Returns the model nodes whose display changed.
        """
        changed, moved = self.model.take_changes()
        if self.view_top() is not self._top:
            self.rebuild()
            return changed
        parents: dict[int, Node] = {}
        for n in moved:
            p = self.view_parent(n)
            while p is not None and not p.alive:
                p = self.view_parent(p)
            if p is not None and p.id in self._tnodes:
                parents[p.id] = p
        for p in parents.values():
            t = self._tnodes.get(p.id)
            if t is not None and (t.is_expanded or t is self.root):
                self._sync(p)
        for n in changed:
            t = self._tnodes.get(n.id)
            if t is not None:
                t.refresh()
        return changed

    def _visible_children(self, parent: Node) -> list[Node]:
        children = self.view_children(parent)  # removed nodes are unlinked from these lists
        if not self.model.filtering:
            return children
        visible = self.model.visible
        return [c for c in children if visible(c)]

    def _sync(self, parent: Node) -> None:
        """Make the TreeNode children of ``parent`` match its visible model children (one window)."""
        t = self._tnodes[parent.id]
        desired = self._visible_children(parent)
        start, stop = self._windows.get(parent.id, (0, CHUNK))
        start = min(start, max(0, len(desired) - CHUNK))
        shown = desired[start:stop]
        ids = {n.id for n in shown}
        for child in list(t.children):
            data = child.data
            if isinstance(data, More) or not isinstance(data, Node) or data.id not in ids:
                self._forget(child)
                child.remove()
        existing = list(t.children)
        j = 0
        for i, n in enumerate(shown):
            if j < len(existing) and existing[j].data is n:
                j += 1
                continue
            self._tnodes[n.id] = t.add("", n, before=i, allow_expand=not n.is_leaf)
        if start > 0:
            t.add_leaf("", More(parent, start, earlier=True), before=0)
        if len(desired) > stop:
            t.add_leaf("", More(parent, len(desired) - stop))

    def _forget(self, t: TreeNode[object]) -> None:
        stack = [t]
        while stack:
            node = stack.pop()
            if isinstance(node.data, Node) and self._tnodes.get(node.data.id) is node:
                del self._tnodes[node.data.id]
                self._windows.pop(node.data.id, None)
            stack.extend(node.children)

    def _show_more(self, more: More) -> None:
        """One more chunk of children, after (or before) those shown."""
        parent = more.parent
        start, stop = self._windows.get(parent.id, (0, CHUNK))
        first = self._visible_children(parent)[start] if more.earlier else None
        self._windows[parent.id] = (max(0, start - CHUNK), stop) if more.earlier else (start, stop + CHUNK)
        self._sync(parent)
        if first is not None:  # stay next to where the user was: on the last newly shown child
            before = self._tnodes.get(first.id)
            siblings = self._tnodes[parent.id].children
            if before is not None and before in siblings:
                _ = self.last_line
                self.move_cursor(siblings[max(0, siblings.index(before) - 1)])

    def _show_index(self, parent: Node, index: int) -> None:
        """Move the window of ``parent`` so that its visible child ``index`` is shown."""
        start, stop = self._windows.get(parent.id, (0, CHUNK))
        if not start <= index < stop:
            start = max(0, index - CHUNK // 2)
            self._windows[parent.id] = (start, start + CHUNK)
        self._sync(parent)

    def reveal(self, node: Node) -> TreeNode[object] | None:
        """Materialise and expand the path to ``node`` and put the cursor on it."""
        chain = [node]
        while chain[-1] is not self._top:
            p = self.view_parent(chain[-1])
            if p is None:
                return None
            chain.append(p)
        chain.reverse()
        for parent, child in itertools.pairwise(chain):
            t = self._tnodes.get(parent.id)
            if t is None:
                return None
            if child.id not in self._tnodes:
                try:
                    index = self._visible_children(parent).index(child)
                except ValueError:
                    return None
                self._show_index(parent, index)
            if t is not self.root and not t.is_expanded:
                t.expand()
        target = self._tnodes.get(node.id)
        if target is None:
            return None
        _ = self.last_line  # lay the lines out so the node knows its line
        self.move_cursor(target)
        self.scroll_to_node(target, animate=False)
        return target

    # -- events and actions --------------------------------------------------------------------
    @on(Tree.NodeExpanded)
    def _expanded(self, event: Tree.NodeExpanded[object]) -> None:
        data = event.node.data
        if isinstance(data, Node) and data.id in self._tnodes:
            self._sync(data)
            kids = event.node.children
            if len(kids) == 1 and kids[0].allow_expand and not kids[0].is_expanded:
                kids[0].expand()  # walk down single-child chains (deep call stacks)

    @on(Tree.NodeSelected)
    def _selected(self, event: Tree.NodeSelected[object]) -> None:
        data = event.node.data
        if isinstance(data, More):
            event.stop()
            self._show_more(data)

    def action_collapse_or_parent(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.allow_expand and node.is_expanded:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent)

    def action_expand_or_child(self) -> None:
        node = self.cursor_node
        if node is None or not node.allow_expand:
            return
        if not node.is_expanded:
            node.expand()
        elif node.children:
            self.move_cursor(node.children[0])
