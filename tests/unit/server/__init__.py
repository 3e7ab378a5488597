"""Unit tests of the hook server: app, front settings, executor, metrics, cache, CLI."""
