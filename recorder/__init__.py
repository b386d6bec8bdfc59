"""agui-recorder: a recording proxy, projector and time-travel store for AG-UI traffic."""

__version__ = "0.1.0"
