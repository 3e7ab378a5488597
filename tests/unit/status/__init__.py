"""Unit tests of the status record, aggregation, lifecycle and usage (hooks.core.status)."""
