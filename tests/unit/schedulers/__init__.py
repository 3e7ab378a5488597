"""Unit tests of the schedulers on recorded real output, and their contract (hooks.schedulers)."""
