"""
`elmo serve`'s app on Ray Serve (the `serve` and `ray` extras; docs/serving.md): each replica is a Ray actor that
builds the same app as `elmo serve` (`app.build_app`: the same routes, checks, limits, batcher, metrics and log lines)
around its own model, on its own thread, and Ray Serve's HTTP proxy spreads the requests over the replicas. The
batching is the app's own, per replica: batching at the time step (`inference.step_scheduler`; each input joins the
running rows at the next LSTM step), not `@serve.batch`'s batches of requests; a replica takes requests once its
model is loaded and warmed.

    from ray import serve
    from modeling_elmo.serve.ray_deployment import elmo_deployment
    serve.run(elmo_deployment(ServeSettings("elmo-fixture"), num_replicas=2), route_prefix="/")

A quantized model (`elmo serve --quantization int8`): `ServeSettings("elmo-fixture", quantization="int8")`.

Requests at once (`max_ongoing_requests`): Ray Serve sends a replica at most that many requests not yet answered (5
unless told) and queues the others in its proxy, which would cap the app's batches at 5 requests. A replica here takes
what its batcher is built to take: `settings.max_queue` inputs queued or running (`elmo serve --max-queue`), and a
request to the embedding routes holds at least one input, so `settings.max_queue` requests, plus `OTHER_REQUESTS` for
the requests that never queue (health checks, metrics, the model list, a refused input). The back-pressure is then the
app's, as with `elmo serve`: a replica whose queue is full answers 429 (`queue_full`, OpenAI's error body) and Ray
does not retry it elsewhere. Ray's own queue, in its proxy, holds only the requests that find every replica at its
count, which the apps would refuse anyway; it is unbounded unless `max_queued_requests` is given (Ray then answers
503, or 429 with `backpressure_config`, with a line of text, not OpenAI's error body).

Replicas and hardware: each replica reserves `num_cpus` CPUs (and `num_gpus` GPUs, with `device="cuda"` in the
settings) of the Ray cluster; a node holds as many replicas as its CPUs (or GPUs) allow. Its torch threads follow the
project's policy (`runtime.cpu_threads`) for the CPUs it reserved: as many as its share's whole part (at least one),
fewer where other processes keep the node's CPUs busy when it starts; `torch_threads` (or an `OMP_NUM_THREADS` of the
user's, through Ray's runtime_env or the environment Ray started in) sets the count instead. The wait policy is the
process's (torch is loaded with this package before a replica's constructor runs, and OpenMP reads `OMP_WAIT_POLICY`
then): for replicas of several threads on a busy node, give `OMP_WAIT_POLICY=PASSIVE` through Ray's runtime_env.
"""

import logging
import math
import os
from typing import Any

import ray
from ray import serve
from ray.serve import Application, Deployment

from ..runtime.cpu_threads import configure_cpu_threads
from .app import build_app
from .service import EmbeddingService
from .settings import ServeSettings

LOG = logging.getLogger("ray.serve")  # Ray Serve's own logger: its lines go to the replica's log
# requests a replica takes beside those its queue holds: health checks, metrics scrapes, the model list, and requests
# refused before they queue (a bad or oversized input); each is answered without the model, in well under a millisecond
OTHER_REQUESTS = 16


def max_ongoing_requests(settings: ServeSettings) -> int:
    """The requests a replica of `settings` takes at once: as many as its queue holds (`max_queue` inputs, at least
    one a request), and `OTHER_REQUESTS` more."""
    return settings.max_queue + OTHER_REQUESTS


@serve.deployment
@serve.ingress()
class ElmoEmbeddings:
    """One replica: `settings` (the model and the batching and limits of `elmo serve`); `torch_threads`: its thread
    count (None: the project's policy for the CPUs Ray reserved for it, `replica_threads`)."""

    def __init__(self, settings: ServeSettings, torch_threads: int | None = None):
        self.settings = settings
        self.torch_threads = replica_threads(torch_threads)
        LOG.info("replica of %s: torch threads %d", settings.model_name, self.torch_threads)

    def __serve_build_asgi_app__(self):
        return build_app(EmbeddingService(self.settings), load_in_background=False, freeze_after_load=True)


def replica_threads(torch_threads: int | None = None) -> int:
    """Set this replica's torch threads and return them: `torch_threads` where given; else an `OMP_NUM_THREADS` of
    the user's (in Ray's runtime_env, or other than Ray's own, the whole part of the CPUs reserved) kept; else
    `runtime.cpu_threads`' policy for the CPUs Ray reserved for this actor (1 where it reserved none)."""
    import torch

    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
        return torch.get_num_threads()
    context = ray.get_runtime_context()
    reserved = context.get_assigned_resources().get("CPU", 1.0)
    rays_own = str(max(1, math.floor(reserved)))  # what Ray sets where the user set nothing
    found = os.environ.get("OMP_NUM_THREADS", rays_own)
    if found == rays_own and "OMP_NUM_THREADS" not in context.runtime_env.env_vars():
        configure_cpu_threads(reserved_cpus=reserved)
    return torch.get_num_threads()


def replica_deployment(
    settings: ServeSettings,
    num_replicas: int | str | None = None,
    num_cpus: float = 1,
    num_gpus: float = 0,
    **options: Any,
) -> Deployment:
    """The deployment of `num_replicas` replicas of `settings` (None: Ray's default, one, or as `autoscaling_config`
    scales), each reserving `num_cpus` CPUs and `num_gpus` GPUs and taking `max_ongoing_requests(settings)` requests
    at once; `options`: Ray Serve's other deployment options (`max_queued_requests`, `backpressure_config`,
    `autoscaling_config`, or another `max_ongoing_requests`)."""
    chosen: dict[str, Any] = {
        "ray_actor_options": {"num_cpus": num_cpus, "num_gpus": num_gpus},
        "max_ongoing_requests": max_ongoing_requests(settings),
    }
    if num_replicas is not None:
        chosen["num_replicas"] = num_replicas
    return ElmoEmbeddings.options(**{**chosen, **options})


def elmo_deployment(
    settings: ServeSettings,
    num_replicas: int | str | None = None,
    num_cpus: float = 1,
    num_gpus: float = 0,
    torch_threads: int | None = None,
    **options: Any,
) -> Application:
    """The Ray Serve application of `replica_deployment(settings, num_replicas, num_cpus, num_gpus, **options)`,
    whose replicas run torch on `torch_threads` threads (None: the policy for `num_cpus`, `replica_threads`)."""
    return replica_deployment(settings, num_replicas, num_cpus, num_gpus, **options).bind(settings, torch_threads)
