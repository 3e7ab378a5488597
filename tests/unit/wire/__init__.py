"""Unit tests of Metacontroller's request and response shapes, the log Pod (hooks.core.wire)."""
