"""phasetop's own Textual themes, registered beside Textual's built-in ones."""

from __future__ import annotations

from textual.theme import Theme

PROJECTOR = Theme(
    name="phasetop-projector",
    primary="#00E5FF",
    secondary="#FFD400",
    accent="#FF5CE1",
    warning="#FFB000",
    error="#FF4D4D",
    success="#3DFF6E",
    foreground="#FFFFFF",
    background="#000000",
    surface="#000000",
    panel="#262626",
    dark=True,
    # Textual's text is "auto 87%" and its muted text 60 %, grey on a projector's washed-out black: white here.
    variables={
        "text": "#FFFFFF",
        "text-muted": "#E0E0E0",
        "text-disabled": "#B0B0B0",
        "foreground-muted": "#E0E0E0",
        "border": "#FFFFFF",
        "border-blurred": "#B0B0B0",
        "footer-key-foreground": "#FFD400",
        "footer-description-foreground": "#FFFFFF",
        "block-cursor-foreground": "#000000",
        "block-cursor-background": "#FFD400",
    },
)
"""Bright text on black with saturated marks, readable on a projector (the theme picker lists it)."""

THEMES = (PROJECTOR,)
"""The themes phasetop registers beside Textual's own."""
