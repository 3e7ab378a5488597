"""Unit tests of the sync and finalize decisions through whole calls (hooks.core.decide)."""
