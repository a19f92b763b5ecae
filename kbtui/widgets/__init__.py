"""The panes of the KernelBrain TUI, each updated in place from the session's files."""
