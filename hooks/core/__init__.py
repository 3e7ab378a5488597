"""The pure core of hpcbridge.

Everything in this package is a function of its arguments: parsing a Metacontroller request,
validating a BatchJob spec and its Secret, mapping scheduler states, aggregating tasks, building
the status, the log Pod and the hook response. Nothing here does I/O: no sockets, no processes,
no files, no clock and no environment variables — time comes in as an argument. That keeps every
decision testable on recorded input, and lets the imperative shell (``hooks.executor``) be the one
place that talks to clusters. ``tests/unit/test_core_purity.py`` enforces the rule on imports.
"""
