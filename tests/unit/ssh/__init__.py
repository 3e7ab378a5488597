"""Unit tests of routes, logins and the connection pool (hooks.ssh)."""
