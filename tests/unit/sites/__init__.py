"""Unit tests of BatchClusters, routing, selectors and the login Secret (hooks.core.sites)."""
