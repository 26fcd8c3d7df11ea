"""
The server's Prometheus metrics (`GET /metrics`, text format), in a registry of their own per app:

- `elmo_requests_total{route, status}`: requests answered, by route and HTTP status;
- `elmo_request_errors_total{status}`: requests answered with a status of 400 or more;
- `elmo_inputs_total`, `elmo_words_total`: inputs and words the model finished, failed ones included (words/s:
  `rate(elmo_words_total[1m])`);
- `elmo_step_rows`: histogram of the rows of each time step (every layer's, `inference.step_scheduler`);
- `elmo_input_seconds`: histogram of each input's time from its arrival to its result;
- `elmo_model_seconds`: histogram of each time step's time on the model (its admissions included);
- `elmo_queued_inputs`, `elmo_unanswered_inputs`: inputs on the model's thread (waiting or running), and inputs
  accepted and not answered, now;
- `elmo_ready`: 1 once the model is loaded and warmed.
"""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .batcher import StepMetrics

CONTENT_TYPE = CONTENT_TYPE_LATEST
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class ServeMetrics:
    """The metrics of one server (see the module docstring); `queued` and `unanswered` are read at each scrape."""

    def __init__(self, queued=lambda: 0, unanswered=lambda: 0):
        self.registry = CollectorRegistry()
        registry = self.registry
        self.requests = Counter("elmo_requests", "Requests answered", ["route", "status"], registry=registry)
        self.errors = Counter("elmo_request_errors", "Requests answered with an error", ["status"], registry=registry)
        self.inputs = Counter("elmo_inputs", "Inputs run on the model", registry=registry)
        self.words = Counter("elmo_words", "Words run on the model", registry=registry)
        self.step_rows = Histogram("elmo_step_rows", "Rows per time step", buckets=SIZE_BUCKETS, registry=registry)
        self.input_time = Histogram(
            "elmo_input_seconds",
            "Each input's time from its arrival to its result",
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.model_time = Histogram(
            "elmo_model_seconds", "Each time step's time on the model", buckets=SECONDS_BUCKETS, registry=registry
        )
        Gauge("elmo_queued_inputs", "Inputs waiting for the model", registry=registry).set_function(queued)
        Gauge("elmo_unanswered_inputs", "Inputs waiting or running", registry=registry).set_function(unanswered)
        self.ready = Gauge("elmo_ready", "1 once the model is loaded and warmed", registry=registry)

    def count_request(self, route: str, status: int) -> None:
        self.requests.labels(route, str(status)).inc()
        if status >= 400:
            self.errors.labels(str(status)).inc()

    def count_step(self, report: StepMetrics) -> None:
        self.inputs.inc(len(report.input_seconds))
        self.words.inc(report.words)
        self.step_rows.observe(report.rows)
        self.model_time.observe(report.model_seconds)
        for seconds in report.input_seconds:
            self.input_time.observe(seconds)

    def text(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
