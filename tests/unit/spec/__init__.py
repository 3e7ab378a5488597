"""Unit tests of the BatchJob spec (hooks.core.spec)."""
