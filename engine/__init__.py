from engine import cpython_fixes  # noqa: F401  (installs its workarounds on import)
