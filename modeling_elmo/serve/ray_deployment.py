"""
`elmo serve`'s app on Ray Serve (the `serve` and `ray` extras; docs/serving.md): each replica is a Ray actor that
builds the same app as `elmo serve` (`app.build_app`: the same routes, checks, limits, batcher, metrics and log lines)
around its own model, on its own thread, and Ray Serve's HTTP proxy spreads the requests over the replicas. The
batching is the app's own (length-sorted batches bounded by words, per replica), the equivalent of `@serve.batch` with
a batch size counted in words; a replica takes requests once its model is loaded and warmed.

    from ray import serve
    from modeling_elmo.serve.ray_deployment import elmo_deployment
    serve.run(elmo_deployment(ServeSettings("elmo-fixture"), num_replicas=2), route_prefix="/")

A quantized model (`elmo serve --quantization int8`): `ServeSettings("elmo-fixture", quantization="int8")`.

Replicas and hardware: each replica reserves `num_cpus` CPUs (and `num_gpus` GPUs, with `device="cuda"` in the
settings) of the Ray cluster and runs torch on `torch_threads` threads; a node holds as many replicas as its CPUs
(or GPUs) allow.
"""

from ray import serve

from .app import build_app
from .service import EmbeddingService
from .settings import ServeSettings


@serve.deployment
@serve.ingress()
class ElmoEmbeddings:
    """One replica: `settings` (the model and the batching and limits of `elmo serve`), `torch_threads` threads."""

    def __init__(self, settings: ServeSettings, torch_threads: int = 1):
        import torch

        torch.set_num_threads(torch_threads)
        self.settings = settings

    def __serve_build_asgi_app__(self):
        return build_app(EmbeddingService(self.settings), load_in_background=False, freeze_after_load=True)


def elmo_deployment(
    settings: ServeSettings, num_replicas: int = 1, num_cpus: float = 1, num_gpus: float = 0, torch_threads: int = 1
):
    """The Ray Serve application of `num_replicas` replicas, each reserving `num_cpus` CPUs and `num_gpus` GPUs."""
    options = {"num_replicas": num_replicas, "ray_actor_options": {"num_cpus": num_cpus, "num_gpus": num_gpus}}
    return ElmoEmbeddings.options(**options).bind(settings, torch_threads)
