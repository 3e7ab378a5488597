"""Unit tests of the container runtimes, their words read by a real ``sh`` (hooks.core.runtimes)."""
