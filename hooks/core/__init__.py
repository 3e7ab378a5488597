"""The pure core of hpcbridge.

Everything in this package is a function of its arguments: parsing a Metacontroller request,
validating a BatchJob spec and its Secret, mapping scheduler states, aggregating tasks, building
the status, the log Pod and the hook response. Nothing here does I/O: no sockets, no processes,
no files, no clock and no environment variables — time comes in as an argument. That keeps every
decision testable on recorded input, and lets the imperative shell (``hooks.executor``) be the one
place that talks to clusters. ``tests/unit/test_core_purity.py`` enforces the rule on imports.

The core is five floors, each a package that imports only the floors below it (import-linter's
contract in ``pyproject.toml``). Start reading at the top, ``decide.sync``:

============  =================================================================================
``decide``    the sync and finalize decisions, the rounds they play, staging, the image, suspension,
              the effects they ask the shell for and the answer they return
``wire``      Metacontroller's request and response shapes, the log Pod and the mover Pods
``status``    the status record, its stored fields read back, usage, transfers, aggregation of
              tasks and the life of an attempt
``sites``     BatchClusters, the route a BatchJob takes, label selectors and the login Secret
``spec``      the BatchJob spec: parse, layout, data, env and inputs, payload, the container
``runtimes``  the container runtimes' command lines, and the batch script that runs an image
``values``    phases, reasons, the job request, units, text, field readers, storage and image values
              and the scheduler SDK (``SchedulerRules``, ``SchedulerError``)
============  =================================================================================
"""
