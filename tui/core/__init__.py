"""Pure measurement core: records, statistics, roofline math. Imports neither Textual nor httpx."""
