"""phasetop in a browser: textual-serve runs one UI process per tab and relays its screen over a websocket."""
