"""Unit tests of the shared values: text (hooks.core.values)."""
