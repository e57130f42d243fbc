"""The on-demand table: rows from a sequence, only visible ones formatted, text never markup."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console, RenderableType
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from agentwatch.tui.common import FittedTable, refill
from agentwatch.tui.table import Cell, Table, line_segments, rich_segments
from tests.tui.test_tui_app import until


class Host(App[None]):
    def __init__(self, rows: list[Any]) -> None:
        super().__init__()
        self.rows = rows
        self.formatted: list[int] = []
        self.selected: list[int] = []

    def compose(self) -> ComposeResult:
        yield Table(id="t")

    def cells(self, item: int) -> list[str | Text]:
        self.formatted.append(item)
        if item == 13:
            raise ValueError("unlucky")
        return [str(item), f"row {item} [/] [bold]not bold[/bold]"]

    def on_mount(self) -> None:
        table = self.query_one(Table)
        table.set_columns([("n", 6), ("text", None)])
        table.set_rows(self.rows, self.cells, follow=True)
        table.focus()

    def on_table_row_selected(self, event: Table.RowSelected) -> None:
        self.selected.append(event.cursor_row)


def screen_lines(app: App[None]) -> list[str]:
    table = app.query_one(Table)
    return [table.render_line(y).text for y in range(table.scrollable_content_region.height)]


async def test_a_huge_sequence_costs_only_the_visible_rows() -> None:
    app = Host(list(range(100_000)))
    async with app.run_test(size=(60, 12)) as pilot:
        await until(pilot, lambda: app.formatted)
        table = app.query_one(Table)
        assert table.row_count == 100_000 and table.cursor_row == 99_999, "follow: the newest row"
        lines = screen_lines(app)
        assert lines[0].split() == ["n", "text"]
        assert lines[-1].lstrip().startswith("99999"), lines
        assert len(set(app.formatted)) < 100, "only what is on screen was formatted"


async def test_text_is_never_markup_and_a_bad_row_does_not_break_the_table() -> None:
    app = Host(list(range(20)))
    async with app.run_test(size=(60, 30)) as pilot:
        await until(pilot, lambda: app.formatted)
        text = "\n".join(screen_lines(app))
        assert "row 3 [/] [bold]not bold[/bold]" in text
        assert "(cannot show this row: ValueError)" in text


async def test_keys_move_the_cursor_and_enter_selects() -> None:
    app = Host(list(range(50)))
    async with app.run_test(size=(60, 12)) as pilot:
        await until(pilot, lambda: app.formatted)
        table = app.query_one(Table)
        await pilot.press("home")
        assert table.cursor_row == 0 and round(table.scroll_y) == 0
        await pilot.press("down", "down", "enter")
        await until(pilot, lambda: app.selected == [2])
        await pilot.press("pagedown")
        assert table.cursor_row > 2
        await pilot.press("end")
        assert table.cursor_row == 49
        visible = table.scrollable_content_region.height - 1
        assert round(table.scroll_y) == 50 - visible, "the cursor row is scrolled into view"
        # rows may shrink under the cursor: it stays on the last one
        table.set_rows(list(range(5)), app.cells)
        assert table.cursor_row == 4


async def test_stable_rows_are_formatted_once_while_they_stay_on_screen() -> None:
    app = Host(list(range(1000)))
    async with app.run_test(size=(60, 12)) as pilot:
        await until(pilot, lambda: app.formatted)
        table = app.query_one(Table)
        rows = list(range(1000))
        table.set_rows(rows, app.cells, follow=True, stable=True)
        await pilot.pause()
        app.formatted.clear()
        rows.append(1000)  # one new row: the view scrolls by one
        table.set_rows(rows, app.cells, follow=True, stable=True)
        await pilot.pause()
        # the new last row, and the old one that lost the cursor; nothing else
        assert sorted(set(app.formatted)) == [999, 1000], app.formatted
        app.formatted.clear()
        table.forget_lines()
        table.refresh()
        await pilot.pause()
        assert len(set(app.formatted)) > 5, "forget_lines renders every visible line again"


async def test_rows_coming_in_scroll_the_newest_into_view_without_laying_out_the_screen() -> None:
    """Under a flood the feed's row count changes at every repaint. The table's scrollbar follows
    it without a layout of the whole screen (which cost more than the repaint), and a following
    table shows its newest row at once, not after the next layout."""
    rows = list(range(30))
    app = Host(rows)
    async with app.run_test(size=(60, 12)) as pilot:
        await until(pilot, lambda: app.formatted)
        await pilot.pause(0.1)
        table = app.query_one(Table)
        assert table.show_vertical_scrollbar
        layouts: list[object] = []
        app.screen.screen_layout_refresh_signal.subscribe(app, layouts.append)
        for _ in range(10):
            rows.extend(range(len(rows), len(rows) + 7))
            table.set_rows(rows, app.cells, follow=True)
            assert screen_lines(app)[-1].lstrip().startswith(str(len(rows) - 1)), screen_lines(app)
            await pilot.pause(0.02)
        assert table.virtual_size.height == len(rows) + 1
        assert (
            round(table.scroll_y)
            == table.max_scroll_y
            == len(rows) + 1 - table.scrollable_content_region.height
        )
        assert table.vertical_scrollbar.window_virtual_size == len(rows) + 1
        assert layouts == []


async def test_a_long_table_growing_at_its_end_draws_its_scrollbar_only_when_the_thumb_moves() -> None:
    """A feed of thousands of rows that follows its newest grows by a few rows a frame: the thumb
    stays at the end, so the scrollbar takes its new figures without being drawn again; a change
    that moves the thumb draws it."""
    rows = list(range(5000))
    app = Host(rows)
    async with app.run_test(size=(60, 12)) as pilot:
        await until(pilot, lambda: app.formatted)
        await pilot.pause(0.1)
        table = app.query_one(Table)
        bar = table.vertical_scrollbar
        drawn: list[int] = []
        render = bar.render

        def counted() -> RenderableType:
            drawn.append(len(rows))
            return render()

        bar.render = counted  # type: ignore[method-assign]
        for _ in range(10):
            rows.extend(range(len(rows), len(rows) + 3))
            table.set_rows(rows, app.cells, follow=True)
            await pilot.pause(0.02)
        assert drawn == [], drawn
        assert bar.window_virtual_size == table.virtual_size.height == len(rows) + 1
        assert bar.position == table.scroll_y == table.max_scroll_y
        assert screen_lines(app)[-1].lstrip().startswith(str(len(rows) - 1))
        table.move_cursor(0)
        await until(pilot, lambda: drawn)
        assert bar.position == table.scroll_y == 0


def test_a_line_is_the_segments_rich_gives_for_the_same_cells() -> None:
    """The table builds a line's segments itself; they are rich's for the Text it used to build."""
    console = Console()
    base = Style(color="white", bgcolor="black")
    cells_of_lines: list[list[Cell]] = [
        ["plain", "cut because it is far too long", "日本語テキスト", "x"],
        ["bell\x07 and\rreturn", "two\nlines", "", "exactly10!"],
        [Text("styled", style="bold red"), "plain", Text("a Style", style=Style(italic=True)), "end"],
        ["first plain", Text("", style="green"), Text("no style"), Text("日本語テキストです", style="dim")],
        [Text("spans: ") + Text("red", style="red"), "through rich"],
        [Text("two\nlines styled", style="bold")],
        ["fewer cells than columns"],
        ["a", "b", "c", "d", "more cells than columns"],
    ]
    for cells in cells_of_lines:
        for widths in ([6, 3, 10, 10], [1, 1, 1, 1], [20, 12, 8, 9]):
            assert line_segments(cells, widths, base, console) == rich_segments(
                cells, widths, base, console
            ), (
                cells,
                widths,
            )


class Refilled(App[None]):
    """A store screen's table: its columns at compose, its rows from an answer later."""

    def __init__(self, kind: type[DataTable[Any]]) -> None:
        super().__init__()
        self.kind = kind

    def compose(self) -> ComposeResult:
        table = self.kind(id="t", cursor_type="row")
        table.add_columns("start", "cost")
        table.styles.height = 5  # a share of the screen, as on the session page: no resize
        yield table


@pytest.mark.parametrize("kind", [FittedTable, DataTable])
async def test_a_paint_before_the_tables_measure_does_not_keep_header_wide_cells(
    kind: type[DataTable[Any]],
) -> None:
    """Rows come from a worker's answer; the screen paints (for another widget) before the table
    is idle and has measured them. A FittedTable shows them whole after; Textual's DataTable keeps
    the cells it painted at the headers' widths (the case this table exists for)."""
    app = Refilled(kind)
    async with app.run_test(size=(60, 8)) as pilot:
        table = app.query_one(DataTable)
        await pilot.pause()
        refill(table, [("11:01:07", "$0.16")])
        table.render_line(1)  # the paint that comes before the measure
        await pilot.pause(0.3)
        shown = table.render_line(1).text.split()
        assert (shown == ["11:01:07", "$0.16"]) is (kind is FittedTable), shown
