"""The KernelBrain TUI: a Textual client of a session folder (docs/session-format.md).

It reads the snapshot and event log that the engine publishes and sends commands through the
session inbox; it never opens state.duckdb and never imports torch or triton."""
