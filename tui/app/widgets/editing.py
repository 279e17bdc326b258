"""Text boxes whose editing keys act in the order they were typed.

Textual runs a widget's bindings (Backspace, the arrows, Home, End) only once the key has bubbled up to the app,
through each parent's message queue, while the box goes on with the printable keys queued behind it. Typed in
one burst (a fast typist, a terminal multiplexer, a remote terminal that sends what was typed in one packet),
"End, Backspace ×3, bogus" on `… 256` came out as `… 25bog`: the letters went in before the deletions ran."""

from __future__ import annotations

from textual import events
from textual.widgets import Input, TextArea


class _KeysInOrder:
    """A box's own bound keys act as they arrive, before the keys behind them. (A plain mixin, not a `Widget`:
    Textual gathers a widget's component classes and CSS along its bases.)"""

    async def _on_key(self, event: events.Key) -> None:
        """Textual calls each base's `_on_key` after this one unless the key's default is prevented."""
        for binding in self._bindings.key_to_bindings.get(event.key, ()):
            if not binding.priority and await self.app.run_action(binding.action, self):  # (Widget's says nothing)
                event.stop()
                event.prevent_default()
                return


class EditInput(_KeysInOrder, Input):
    """An `Input` whose editing keys keep their order."""


class EditArea(_KeysInOrder, TextArea):
    """A `TextArea` whose editing keys keep their order."""
