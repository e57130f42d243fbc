"""The help screen, written from the screens' own key bindings so that it cannot drift from them.

Each key is listed with its Binding's description (the word the footer shows) and, for the live
view, its tooltip (what the key does, in a few words). Keys bound to the same description are
listed together (esc/q Back).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Protocol

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

# (title, bindings) of a screen other than the live view.
Section = tuple[str, Sequence[BindingType]]
KEYS_WIDTH = 10
WORD_WIDTH = 12


class Helped(Protocol):
    """A screen the live view opens: its title in the help, and its keys."""

    HELP: ClassVar[str]
    BINDINGS: ClassVar[list[BindingType]]


def other_screens() -> list[type[Helped]]:
    """Every screen the live view opens, in the order the help lists them (imported here, when
    the help is first asked for: most are opened rarely)."""
    from agentwatch.tui.alerts_view import AlertsScreen
    from agentwatch.tui.cost_view import CostScreen
    from agentwatch.tui.hosts_view import HostsScreen
    from agentwatch.tui.replay import ReplayScreen
    from agentwatch.tui.search_view import SearchScreen
    from agentwatch.tui.session_page import SessionScreen
    from agentwatch.tui.sessions_view import SessionsScreen
    from agentwatch.tui.tools_view import ToolsScreen
    from agentwatch.tui.views import AgentScreen, TeamScreen

    return [AgentScreen, TeamScreen, AlertsScreen, ToolsScreen, SessionsScreen, SessionScreen, ReplayScreen,
            SearchScreen, CostScreen, HostsScreen]  # fmt: skip


def described(app: App[Any], bindings: Iterable[BindingType]) -> list[tuple[str, Binding]]:
    """(keys as shown, binding) for each description, in the order bound; the keys of one
    description joined by '/'. Textual's system bindings are left out."""
    keys: dict[str, list[str]] = {}
    first: dict[str, Binding] = {}
    for binding in Binding.make_bindings(bindings):
        if binding.system:
            continue
        first.setdefault(binding.description, binding)
        shown = app.get_key_display(binding)
        if shown not in keys.setdefault(binding.description, []):
            keys[binding.description].append(shown)
    return [("/".join(keys[description]), binding) for description, binding in first.items()]


def textual_bindings(app: App[Any]) -> list[Binding]:
    """The keys Textual itself binds on every screen: focus, copy, quit, the command palette."""
    own = [*Binding.make_bindings(Screen.BINDINGS), *Binding.make_bindings(App.BINDINGS)]
    if app.ENABLE_COMMAND_PALETTE:
        own.append(
            Binding(
                app.COMMAND_PALETTE_BINDING,
                "command_palette",
                "Command palette",
                key_display=app.COMMAND_PALETTE_DISPLAY,
            )
        )
    return own


class HelpScreen(ModalScreen[None]):
    """What the live view shows, and every key of every screen."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(
        self, about: Sequence[str], live: Sequence[BindingType], others: Sequence[type[Helped]]
    ) -> None:
        """`about`: lines saying what the live view shows; `live`: its bindings, one line each with
        its tooltip; `others`: the other screens, their bindings one paragraph each."""
        super().__init__()
        self.about = about
        self.live = live
        self.screens: list[Section] = [(screen.HELP, screen.BINDINGS) for screen in others]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield Static(self.text(), id="help-text")

    def text(self) -> Text:
        text = Text()
        for line in self.about:
            text.append(f"{line}\n")
        text.append("\nLive view\n", style="bold")
        for keys, binding in described(self.app, self.live):
            text.append(f"  {keys:<{KEYS_WIDTH}}", style="bold")
            text.append(f"{binding.description:<{WORD_WIDTH}}{binding.tooltip}".rstrip() + "\n")
        for title, bindings in [*self.screens, ("Anywhere", textual_bindings(self.app)),
                                ("This help", self.BINDINGS)]:  # fmt: skip
            text.append(f"\n{title}\n", style="bold")
            text.append_text(self._paragraph(bindings))
        text.rstrip()
        return text

    def _paragraph(self, bindings: Sequence[BindingType]) -> Text:
        """Keys and descriptions in a run of text: 'esc/q Back · 1 Timeline · ...'."""
        paragraph = Text("  ")
        for index, (keys, binding) in enumerate(described(self.app, bindings)):
            if index:
                paragraph.append(" · ")
            paragraph.append(keys, style="bold")
            paragraph.append(f" {binding.description}")
        paragraph.append("\n")
        return paragraph
