"""
The HTTP app (Starlette, an ASGI app that uvicorn serves for `elmo serve` and a Ray Serve replica runs as its
ingress): the routes, the body-size check, the log line and the metrics of every request.

Routes: `POST /v1/embeddings` (OpenAI's), `POST /v1/word-embeddings` (ELMo's words and layers), `GET /v1/models`
and `GET /v1/models/{id}` (OpenAI's: the one model served, by its served name), `GET /health`
(200 `{"status": "ready"}` once the model is loaded and warmed, 503 `{"status": "loading"}` before), `GET /metrics`
(Prometheus text). Errors have OpenAI's error body (`protocol.ApiError`): 400 bad input, 404/405 no such route, 413
over a size limit (the body, the inputs, an input's words, the response's estimate: before any model work), 422 a
scalar mix whose values overflow float32, 429 queue full, 500 a model failure (that request only), a batcher failure
or any other server failure (one line, the traceback in the log), 503 the model still loading.

One log line per request (logger `modeling_elmo.serve`): client, method, path, status, inputs, words and
milliseconds, never the text.

The event loop only moves bytes: a request's JSON, its checks and the response's size bound run in worker threads,
and so do the response's values and its encoding, streamed in pieces (`responses`), so that `/health` answers while a
large request is read, computed or sent.
"""

import asyncio
import contextlib
import gc
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from . import responses
from .batcher import BatchFailure, QueueFull
from .metrics import CONTENT_TYPE
from .protocol import (
    ApiError,
    EmbeddingsRequest,
    check_response_size,
    parse_body,
    parse_openai_request,
    parse_word_request,
    too_large,
)
from .runner import SENTENCE, WORDS, ModelFailure
from .service import EmbeddingService

LOG = logging.getLogger("modeling_elmo.serve")
ROUTES = ("/v1/embeddings", "/v1/word-embeddings", "/v1/models", "/health", "/metrics")
OWNED_BY = "elmo-serve"  # OpenAI's `owned_by` of the model served


def build_app(
    service: EmbeddingService,
    load_in_background: bool = True,
    on_load_failure: Callable[[BaseException], None] | None = None,
    freeze_after_load: bool = False,
) -> "RequestLog":
    """The app over `service`. The model loads when the app starts: in the background (`/health` answers 503 until
    it is ready; `on_load_failure` is called with the error if loading fails), or before the app takes requests.
    `freeze_after_load`, for a process that serves this app alone (`elmo serve`, a Ray Serve replica): the objects
    alive once the model is loaded leave the garbage collector's scans (`_load`)."""

    async def embeddings(request: Request) -> Response:
        document = await _document(request, service)
        limits, runner = service.settings.limits, service.runner
        parsed = await asyncio.to_thread(parse_openai_request, document, limits, runner.split_words, runner.width)
        _note(request, parsed.texts, parsed.word_count)
        values = await asyncio.to_thread(responses.sentence_values, parsed, await _embed(service, parsed, SENTENCE))
        return await _streamed(responses.openai_body(parsed, values, service.settings.model_name))

    async def word_embeddings(request: Request) -> Response:
        document = await _document(request, service)
        limits, runner = service.settings.limits, service.runner
        parsed = await asyncio.to_thread(parse_word_request, document, limits, runner.split_words, runner.num_layers)
        _note(request, parsed.texts, parsed.word_count)
        values = await asyncio.to_thread(responses.word_values, parsed, await _embed(service, parsed, WORDS))
        return await _streamed(responses.word_body(parsed, values, service.settings.model_name))

    created = int(time.time())  # OpenAI's `created` of the model: when this server started

    def model_object() -> dict:
        return {"id": service.settings.model_name, "object": "model", "created": created, "owned_by": OWNED_BY}

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [model_object()]})

    async def model(request: Request) -> Response:
        asked = request.path_params["model_id"]
        if asked != service.settings.model_name:
            message = f"model: no model {asked!r:.80} here; this server serves {service.settings.model_name!r}"
            raise ApiError(404, message, "model", code="model_not_found")
        return JSONResponse(model_object())

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ready" if service.ready else "loading"}, 200 if service.ready else 503)

    async def metrics(request: Request) -> Response:
        return Response(service.metrics.text(), media_type=CONTENT_TYPE)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loading = asyncio.create_task(_load(service, freeze_after_load))
        if load_in_background:
            loading.add_done_callback(lambda task: _report_load(task, on_load_failure))
        else:
            await loading
        try:
            yield
        finally:
            loading.cancel()
            await service.close()

    routes = [
        Route("/v1/embeddings", embeddings, methods=["POST"]),
        Route("/v1/word-embeddings", word_embeddings, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", model, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    handlers = {ApiError: _api_error, HTTPException: _http_error, Exception: _server_error}
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers)
    return RequestLog(app, service)


async def _document(request: Request, service: EmbeddingService) -> dict:
    """The request's JSON object, read up to the body limit (413 beyond it, before reading where the length is
    declared); 503 while the model loads."""
    if not service.ready:
        raise ApiError(503, "the model is still loading; GET /health says when it is ready", type="server_error")
    limit = service.settings.limits.body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large("body", f"{declared} bytes, over the limit of {limit} (--max-body-bytes)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large("body", f"over the limit of {limit} bytes (--max-body-bytes)")
        chunks.append(chunk)
    return await asyncio.to_thread(parse_body, b"".join(chunks), service.settings.limits)


async def _streamed(pieces: Iterator[bytes]) -> Response:
    """A JSON response of the body `pieces`, made in worker threads: its first two pieces before the status is sent
    (a failure there is a 500; a body of one piece goes whole, with its length), the others streamed as made."""

    def start() -> tuple[bytes, bytes | None]:
        return next(pieces, b""), next(pieces, None)

    first, second = await asyncio.to_thread(start)
    if second is None:
        return Response(first, media_type="application/json")
    return StreamingResponse(itertools.chain((first, second), pieces), media_type="application/json")


def _note(request: Request, texts: list[str], words: int) -> None:
    """What the log line says of a request (its sizes, never its text)."""
    request.scope.setdefault("elmo", {}).update(inputs=len(texts), words=words)


async def _embed(service: EmbeddingService, parsed: EmbeddingsRequest, kind: str) -> list:
    """Each input's result (`runner.SENTENCE` or `runner.WORDS`), once its response is known to fit the budget."""
    runner, settings = service.runner, service.settings
    size_check = (parsed, settings.limits, runner.width, runner.num_layers, kind == WORDS, settings.model_name)
    await asyncio.to_thread(check_response_size, *size_check)
    try:
        return await service.embed(parsed, kind)
    except QueueFull as error:
        raise ApiError(429, str(error), type="rate_limit_error", code="queue_full") from None
    except ModelFailure as error:
        raise ApiError(500, str(error), type="server_error", code="model_failure") from None
    except BatchFailure as error:
        raise ApiError(500, str(error), type="server_error", code="batch_failure") from None


async def _load(service: EmbeddingService, freeze: bool) -> None:
    """Load the model (`service.load`); with `freeze`, then move every object alive to the collector's permanent
    generation (`gc.freeze`) before `/health` can say ready: a full collection then scans only what requests make,
    where it scanned torch's and the model's 400,000 objects too, 0.2-0.8 s with the GIL held on 2 busy cores
    (measured: `/health` waited 0.75 s for one during a large request)."""
    await service.load()
    if freeze:
        gc.collect()
        gc.freeze()


def _report_load(task: asyncio.Task, on_load_failure) -> None:
    if task.cancelled() or task.exception() is None:
        return
    if on_load_failure is not None:
        on_load_failure(task.exception())


async def _api_error(request: Request, error: Exception) -> Response:
    return JSONResponse(error.body(), error.status)


async def _server_error(request: Request, error: Exception) -> Response:
    """Any other failure: OpenAI's error body, one line (Starlette logs the traceback after it answers)."""
    message = f"the server failed on this request ({type(error).__name__}); its log has the details"
    return JSONResponse(ApiError(500, message, type="server_error", code="server_failure").body(), 500)


async def _http_error(request: Request, error: HTTPException) -> Response:
    kind = "not_found" if error.status_code == 404 else "invalid_request_error"
    message = f"{request.method} {request.url.path}: {error.detail}; the routes are {', '.join(ROUTES)}, /v1/models/ID"
    body = ApiError(error.status_code, message, type=kind).body()
    return JSONResponse(body, error.status_code, headers=getattr(error, "headers", None))


def _route_label(path: str) -> str:
    """The metrics' `route` of a request path: a route, `/v1/models/{id}` for any model id, or "other"."""
    if path in ROUTES:
        return path
    return "/v1/models/{id}" if path.startswith("/v1/models/") else "other"


class RequestLog:
    """ASGI middleware: one log line and the request metrics for every HTTP request (an error before the app
    answers is a 500 in both)."""

    def __init__(self, app: Starlette, service: EmbeddingService):
        self.app, self.service = app, service

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, answered = time.monotonic(), {"status": 500}

        async def send_status(message) -> None:
            if message["type"] == "http.response.start":
                answered["status"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            path, status = scope["path"], answered["status"]
            self.service.metrics.count_request(_route_label(path), status)
            sizes = scope.get("elmo", {})
            client = "{}:{}".format(*scope["client"]) if scope.get("client") else "-"
            LOG.info(
                '%s "%s %s" %d inputs=%s words=%s %.1fms',
                client,
                scope["method"],
                path,
                status,
                sizes.get("inputs", "-"),
                sizes.get("words", "-"),
                1000 * (time.monotonic() - started),
            )
