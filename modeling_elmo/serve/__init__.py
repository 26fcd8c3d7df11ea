"""[tools] `elmo serve`: ELMo over HTTP (the `serve` extra; Ray Serve: the `ray` extra; docs/serving.md). protocol.py
(request bodies checked, OpenAI's error body), responses.py (response bodies, float or base64), settings.py (what a
server serves and how), arguments.py (the command line, checked before torch is imported), runner.py (the model on its
thread: batches of jobs), batcher.py (the queue and its length-sorted batches bounded by words), metrics.py
(Prometheus), service.py (model, batcher and metrics of one server), app.py (the Starlette app: routes, limits, log
lines), cli.py (uvicorn, SIGTERM), ray_deployment.py (the same app on Ray Serve replicas)."""
