"""A table that draws its rows from a sequence on demand: only the lines on screen are rendered.

The live roster and feed change several times a second under heavy traffic. Rebuilding a DataTable
each time costs Textual a measure of every cell, however few rows are visible (hundreds of ms for
a 400-row feed on a small machine). This table keeps no rows of its own: it holds a reference to a
sequence and a function that turns one item into cells, and formats only the visible items when
Textual asks for a line. Column widths are set by the owner, so nothing is ever measured, and cell
text is never read as markup (an event about `[/]` is shown as it is).

Rows the owner marks as unchanging (feed lines) keep their rendered line from frame to frame, so
a feed that scrolls by hundreds of events a second renders only the lines new on screen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import ceil
from typing import Any, ClassVar

from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.control import strip_control_codes
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar
from textual.strip import Strip

Cell = str | Text
Render = Callable[[Any], Sequence[Cell]]


def _no_cells(_item: Any) -> Sequence[Cell]:
    return ()


def _same_cells(a: Sequence[Cell], b: Sequence[Cell]) -> bool:
    """The same text in the same styles (rich's Text equality leaves the text's own style out)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, Text):
            if not (isinstance(y, Text) and x == y and x.style == y.style):
                return False
        elif x != y:
            return False
    return True


def _fit(plain: str, width: int) -> str:
    """`plain` in exactly `width` cells: cut with an ellipsis, or padded (rich's Text.truncate)."""
    length = cell_len(plain)
    if length > width:
        return set_cell_size(plain, width - 1) + "…"
    return plain + " " * (width - length) if length < width else plain


def line_segments(
    cells: Sequence[Cell], widths: Sequence[int], base: Style, console: Console
) -> tuple[list[Segment], int, Style]:
    """One table line's segments, its length in cells, and its style: each cell cut or padded to
    its column's width between two spaces, in `base` and the cell's own style. The same segments
    rich gives for the Text the table used to build per line (tests/tui/test_tui_table.py holds it
    to that), without building one: that was most of a feed line's cost, and under a flood every
    line of the feed is new at every frame. A cell with styled parts of its own goes through rich."""
    if any(isinstance(cell, Text) and cell.spans for cell in cells):
        return rich_segments(cells, widths, base, console)
    get_style = console.get_style
    segments: list[Segment] = []
    plain = ""  # text in the line's own style, not yet a segment
    length = 0
    for cell, width in zip(cells, widths, strict=False):
        if isinstance(cell, Text):
            text, style = cell.plain, cell.style
        else:
            text, style = strip_control_codes(str(cell)), ""
        text = _fit(text.replace("\n", " ") if "\n" in text else text, width)
        length += width + 2
        if not style:
            plain += f" {text} "
            continue
        segments.append(Segment(plain + " ", base))
        segments.append(Segment(text, base + get_style(style, default=Style.null())))
        plain = " "
    if not segments:
        # rich gives a Text without styled parts as one segment with no style at all: the line's
        # own style (the header's, the cursor's) is then left to the widget's (as it always was).
        return [Segment(plain)], length, base
    segments.append(Segment(plain, base))
    return segments, length, base


def rich_segments(
    cells: Sequence[Cell], widths: Sequence[int], base: Style, console: Console
) -> tuple[list[Segment], int, Style]:
    line = Text(style=base, no_wrap=True, end="")
    for cell, width in zip(cells, widths, strict=False):
        text = cell.copy() if isinstance(cell, Text) else Text(str(cell))
        if "\n" in text.plain:
            text = Text(text.plain.replace("\n", " "), style=text.style)
        text.truncate(width, overflow="ellipsis", pad=True)
        line.append(" ")
        line.append_text(text)
        line.append(" ")
    return list(line.render(console)), line.cell_len, base


@dataclass(frozen=True)
class _Pass:
    """What every line of one rendering pass shares."""

    width: int
    widths: list[int]
    scroll_x: int
    scroll_y: int
    view: tuple[int, int, int]
    base: Style
    cursor: Style
    blurred: Style
    header: Style


class Table(ScrollView, can_focus=True):
    """Columns of fixed width (one may fill the rest), a header line, a cursor row."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"table--header", "table--cursor", "table--cursor-blurred"}
    DEFAULT_CSS = """
    Table {
        background: $surface;
        scrollbar-gutter: stable;
    }
    Table > .table--header {
        text-style: bold;
        color: $text-accent;
        background: $panel;
    }
    Table > .table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    Table > .table--cursor-blurred {
        background: $block-cursor-blurred-background;
        text-style: $block-cursor-blurred-text-style;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter",
            "select",
            "Open",
            show=False,
            tooltip="the selected event (feed) or agent (roster), in full",
        ),
        Binding("up", "cursor(-1)", "Row up/down", show=False),
        Binding("down", "cursor(1)", "Row up/down", show=False),
        Binding("pageup", "page(-1)", "Page up/down", show=False),
        Binding("pagedown", "page(1)", "Page up/down", show=False),
        Binding("home", "jump(0)", "First/last row", show=False),
        Binding("end", "jump(-1)", "First/last row", show=False),
    ]

    class RowSelected(Message):
        """Enter (or a double click) on a row."""

        def __init__(self, table: Table, cursor_row: int) -> None:
            super().__init__()
            self.table = table
            self.cursor_row = cursor_row

        @property
        def control(self) -> Table:
            return self.table

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._columns: list[tuple[str, int | None]] = []
        self._rows: Sequence[Any] = ()
        self._to_cells: Render = _no_cells
        self.cursor_row = 0
        self._stable = False
        # id(item) -> (item, line key, strip): the item is kept to tell a reused id from the same row
        self._lines: LRUCache[int, tuple[Any, tuple[int | bool, ...], Strip]] = LRUCache(1024)
        self._epoch = 0
        # What each screen line was last drawn from (its item, or its cells for rows that are not
        # stable; and whether the cursor was on it), and the view it was drawn in: a new frame
        # asks Textual to draw again only the lines whose row changed (see _refresh_changed).
        self._drawn: dict[int, tuple[Any, int] | None] = {}
        self._drawn_view: tuple[int, int, int] | None = None
        self._cells: dict[int, Sequence[Cell]] = {}  # row index -> its cells, for this frame
        self._pass: _Pass | None = None
        self._in_pass = False
        self._header: tuple[tuple[Any, ...], Strip] | None = None
        self._scrollbar_due = False

    # -- what the owner sets -----------------------------------------------------------------

    def set_columns(self, columns: Sequence[tuple[str, int | None]]) -> None:
        """(label, width) of each column; a width of None takes whatever the others leave."""
        self._columns = list(columns)
        self.forget_lines()
        self._resize_virtual()
        self.refresh()

    def forget_lines(self) -> None:
        """Render every line anew (the owner's colours changed, say)."""
        self._epoch += 1
        self._lines.clear()

    @property
    def column_labels(self) -> list[str]:
        return [label for label, _ in self._columns]

    def set_rows(
        self, rows: Sequence[Any], render: Render, *, follow: bool = False, stable: bool = False
    ) -> None:
        """Show `rows` (kept by reference, not copied), each turned into cells by `render`.

        `stable`: an item always renders the same, so its line may be kept from frame to frame.
        """
        self._rows, self._to_cells, self._stable = rows, render, stable
        self._cells = {}
        self._resize_virtual(later=True)
        if follow:
            self.move_cursor(len(rows) - 1)
        else:
            self.move_cursor(self.cursor_row, scroll=False)
        if self._scrollbar_due:
            self._settle_scrollbar()

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def get_row_at(self, index: int) -> list[Cell]:
        return list(self._to_cells(self._rows[index]))

    def move_cursor(self, row: int, *, scroll: bool = True) -> None:
        last = len(self._rows) - 1
        self.cursor_row = max(0, min(row if row >= 0 else last, last))
        if scroll:
            self._scroll_to_cursor()
        self._refresh_changed()

    def _view(self) -> tuple[int, int, int]:
        return (round(self.scroll_y), self.scrollable_content_region.width, self._epoch)

    def _shown(self, index: int) -> tuple[Any, int] | None:
        """What line `index` is drawn from: its item (stable rows) or its cells, and the cursor
        (0 not on it, 1 on it, 2 on it and the table focused)."""
        if index >= len(self._rows):
            return None
        item = self._rows[index]
        if not self._stable:
            item = self._cells.get(index)
            if item is None:
                item = self._cells[index] = self._cells_of(self._rows[index])
        return (item, (1 + self.has_focus) if index == self.cursor_row else 0)

    def _refresh_changed(self) -> None:
        """Have Textual draw again the lines whose row changed since they were drawn (all of them
        when the view moved: scrolled, resized, colours; the cursor's when focus came or went). The
        roster's rows are mostly the same from one frame to the next; each line drawn again cost
        Textual about 0.3 ms."""
        if self._drawn_view != self._view():
            self.refresh()
            return
        top, width = round(self.scroll_y), self.size.width
        for y in range(1, self.scrollable_content_region.height):
            shown, drawn = self._shown(top + y - 1), self._drawn.get(y)
            if shown is None or drawn is None:
                same = shown is drawn
            else:
                same = shown[1] == drawn[1] and (
                    shown[0] is drawn[0] if self._stable else _same_cells(shown[0], drawn[0])
                )
            if not same:
                self.refresh(Region(0, y, width, 1))

    # -- geometry ----------------------------------------------------------------------------

    def _widths(self, total: int) -> list[int]:
        fixed = sum(w for _, w in self._columns if w is not None)
        padding = 2 * len(self._columns)
        rest = max(8, total - fixed - padding)
        return [w if w is not None else rest for _, w in self._columns]

    def _resize_virtual(self, *, later: bool = False) -> None:
        """The virtual size for the rows and columns. `later`: the scrollbar is settled by the
        caller, once the cursor has moved (a feed that follows its newest row ends where it was)."""
        width = sum(self._widths(self.scrollable_content_region.width)) + 2 * len(self._columns)
        size = Size(width, len(self._rows) + 1)
        if size == self.virtual_size:
            return
        if width != self.virtual_size.width or not self.is_mounted:
            self.virtual_size = size
            return
        # Only the number of rows changed. The table's size is its pane's (height 1fr), never its
        # rows', so nothing else moves: its scrollbar is updated (a layout when one appears or
        # goes), without the layout of the whole screen that `virtual_size` asks for. Under a
        # flood the feed's row count changes at every repaint; that layout cost more than the
        # repaint itself.
        self.set_reactive(Table.virtual_size, size)
        if later and self._scrollbar_stays(size.height):
            self._scrollbar_due = True
        else:
            self._settle_scrollbar()

    def _settle_scrollbar(self) -> None:
        self._scrollbar_due = False
        if self._thumb_stays(self.virtual_size.height, self.scroll_y):
            self.scroll_y = self.validate_scroll_y(self.scroll_y)
        else:
            self._scroll_update(self.virtual_size)

    def _scrollbar_stays(self, rows: int) -> bool:
        """The vertical scrollbar is shown, for the rows it has and for `rows`."""
        if not self.show_vertical_scrollbar or not self.vertical_scrollbar.is_mounted:
            return False
        return min(rows, self.vertical_scrollbar.window_virtual_size) > self.container_size.height

    def _thumb_stays(self, rows: int, position: float) -> bool:
        """The vertical scrollbar takes `rows` and `position` without a repaint when they draw its
        thumb where it is drawn now (a feed of thousands of lines, growing by a few, scrolled to
        its end): Textual repaints a scrollbar whenever its figures change, a tenth of a frame's
        cost under a flood. Textual's own drawing of the bar decides, for the figures it shows and
        the new ones; a bar that appears or goes takes the ordinary way."""
        if not self._scrollbar_stays(rows):
            return False
        bar = self.vertical_scrollbar
        position = bar.validate_position(position)

        def drawn(virtual: int, at: float) -> list[Segment]:
            window = bar.window_size if bar.window_size < virtual else 0
            return bar.renderer.render_bar(
                size=bar.size.height,
                virtual_size=ceil(virtual),
                window_size=ceil(window),
                position=at,
                thickness=bar.size.width,
            ).segments

        if drawn(rows, position) != drawn(bar.window_virtual_size, bar.position):
            return False
        bar.set_reactive(ScrollBar.window_virtual_size, rows)
        bar.set_reactive(ScrollBar.position, position)
        return True

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        if not self._thumb_stays(self.virtual_size.height, new_value):
            super().watch_scroll_y(old_value, new_value)
        elif round(old_value) != round(new_value):
            self.refresh(self.size.region)

    def on_resize(self, _event: events.Resize) -> None:
        self._resize_virtual()
        self._scroll_to_cursor()

    def _scroll_to_cursor(self) -> None:
        visible = max(1, self.scrollable_content_region.height - 1)
        top = round(self.scroll_y)
        if self.cursor_row < top:
            top = self.cursor_row
        elif self.cursor_row >= top + visible:
            top = self.cursor_row - visible + 1
        if top != round(self.scroll_y):
            self.scroll_to(y=top, animate=False, immediate=True)

    # -- drawing -----------------------------------------------------------------------------

    def render_lines(self, crop: Region) -> list[Strip]:
        """The compositor's lines: what they all share (widths, styles, the view) worked out once,
        not per line (the widget's style alone walks every ancestor's styles: 2 ms a frame)."""
        self._pass = None
        self._in_pass = True
        try:
            return super().render_lines(crop)
        finally:
            self._in_pass, self._pass = False, None

    def _shared(self) -> _Pass:
        context = self._pass
        if context is None:
            width = self.scrollable_content_region.width
            context = _Pass(
                width=width,
                widths=self._widths(width),
                scroll_x=round(self.scroll_x),
                scroll_y=round(self.scroll_y),
                view=self._view(),
                base=self.rich_style,
                cursor=self.get_component_rich_style("table--cursor"),
                blurred=self.get_component_rich_style("table--cursor-blurred"),
                header=self.get_component_rich_style("table--header"),
            )
            if self._in_pass:
                self._pass = context
        return context

    def render_line(self, y: int) -> Strip:
        context = self._shared()
        width, scroll_x = context.width, context.scroll_x
        if y == 0:
            heading = (tuple(self.column_labels), tuple(context.widths), scroll_x, width, context.header)
            if self._header is None or self._header[0] != heading:
                header = line_segments(
                    self.column_labels, context.widths, context.base + context.header, self.app.console
                )
                self._header = (heading, self._strip(header, scroll_x, width))
            return self._header[1]
        index = context.scroll_y + y - 1
        base = context.base
        self._drawn_view = context.view
        shown = self._drawn[y] = self._shown(index)
        if shown is None:
            return Strip.blank(width, base)
        item = self._rows[index]
        cursor = shown[1] > 0
        key = (self._epoch, width, scroll_x, shown[1])
        if self._stable:
            cached = self._lines.get(id(item))
            if cached is not None and cached[0] is item and cached[1] == key:
                return cached[2]
        if cursor:
            base = base + (context.cursor if shown[1] == 2 else context.blurred)
        cells = self._cells_of(item) if self._stable else shown[0]
        strip = self._strip(line_segments(cells, context.widths, base, self.app.console), scroll_x, width)
        if self._stable:
            self._lines.set(id(item), (item, key, strip))
        return strip

    def _cells_of(self, item: Any) -> Sequence[Cell]:
        try:
            return self._to_cells(item)
        except Exception as exc:  # one bad item must not take the screen down
            blank: list[Cell] = [""] * (len(self._columns) - 1)
            return [*blank, Text(f"(cannot show this row: {type(exc).__name__})")]

    def _strip(self, line: tuple[list[Segment], int, Style], scroll_x: int, width: int) -> Strip:
        segments, length, style = line
        strip = Strip(segments, length)
        if scroll_x == 0 and length == width:
            return strip
        return strip.crop_extend(scroll_x, scroll_x + width, style)

    # -- input -------------------------------------------------------------------------------

    def action_cursor(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step)

    def action_page(self, direction: int) -> None:
        self.move_cursor(self.cursor_row + direction * max(1, self.scrollable_content_region.height - 2))

    def action_jump(self, row: int) -> None:
        self.move_cursor(row)

    def action_select(self) -> None:
        if self._rows:
            self.post_message(self.RowSelected(self, self.cursor_row))

    def on_click(self, event: events.Click) -> None:
        if event.y < 1:
            return
        row = round(self.scroll_y) + event.y - 1
        if 0 <= row < len(self._rows):
            self.move_cursor(row, scroll=False)
            if event.chain >= 2:
                self.post_message(self.RowSelected(self, row))

    def on_focus(self, _event: events.Focus) -> None:
        self._refresh_changed()

    def on_blur(self, _event: events.Blur) -> None:
        self._refresh_changed()
