"""What the recorder tells its operators: metrics, logs, traces.

observer.py    Observer, RunWatch: the few calls the proxy makes; NO_OBSERVER does nothing
observers.py   Telemetry: the observer that measures runs and feeds the parts below
metrics.py     Metrics: the Prometheus metrics, in a registry of their own
logs.py        logging as text or JSON lines; a line per ended run; error ids
traces.py      TraceExport: each run as an OpenTelemetry trace over OTLP/HTTP (the ``otel``
               extra; imported only when an endpoint is configured)
"""

from recorder.telemetry.observer import NO_OBSERVER, Observer, RunEnd, RunReport, RunWatch

__all__ = ["NO_OBSERVER", "Observer", "RunEnd", "RunReport", "RunWatch"]
