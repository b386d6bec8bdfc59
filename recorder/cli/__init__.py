"""The ``recorder`` command.

``main`` parses (``parser``), runs the chosen handler on an event loop and turns every
error into one line on stderr and an exit code. Commands live in ``commands/``, one module
per group, each with a ``register(commands)`` that declares its commands and their
options. A handler takes a ``Context`` and returns the exit code; a command that reads or
writes recorded data asks ``context.backend()`` for a ``Backend`` (``backend``): the
database (``--db``, ``LocalBackend``) or a running server (``--url``, the client library),
the same questions and the same answers either way.

Adding a command: a handler in its group's module, declared in its ``register`` with
``data=True`` (``--db``, ``--url``, ``--token``, ``-v``) and ``json=True`` if it prints data;
print through ``context.out`` (``data(model, text)`` gives ``--json`` for free).
"""
