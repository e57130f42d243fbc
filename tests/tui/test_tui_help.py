"""The help lists every screen the live view opens with that screen's own keys, Alerts included:
its sections come from the screens (help.other_screens), not from a list of titles and keys."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Static

from agentwatch.tui.alerts_view import AlertsScreen
from agentwatch.tui.app import AgentwatchApp, HelpScreen
from agentwatch.tui.help import other_screens
from tests.tui.test_tui_app import FakeLive, until


async def test_the_help_has_a_section_for_every_screen_with_its_own_keys() -> None:
    assert AlertsScreen in other_screens()
    app = AgentwatchApp(FakeLive([]))
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        lines = str(app.screen.query_one("#help-text", Static).render()).splitlines()
        for screen in other_screens():
            assert screen.HELP in lines, f"no section {screen.HELP!r}"
            section = lines[lines.index(screen.HELP) + 1]
            for binding in Binding.make_bindings(screen.BINDINGS):
                assert app.get_key_display(binding) in section and binding.description in section, (
                    f"{screen.HELP}: {binding.key} ({binding.description})"
                )
