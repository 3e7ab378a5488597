"""Unit tests of the child Pods' programs (hooks.pods)."""
