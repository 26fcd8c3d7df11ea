"""
`elmo serve MODEL` (`elmo-serve`): the model served over HTTP by uvicorn on `--host` (127.0.0.1) and `--port`.

The server listens at once and loads the model in the background (`GET /health`: 503, then 200 once loaded and
warmed); an address it cannot listen on (bound first, before anything loads) and a model that cannot load are one
line on stderr and exit status 1. SIGTERM (and Ctrl-C) stops accepting connections, answers every request already
accepted, and exits 0.
"""

import logging
import signal
import socket
import sys

from ..foundation.errors import ToolError, command_as_typed, one_line
from .arguments import PROG, parse_command_line

LOG = logging.getLogger("modeling_elmo.serve")


class ListenError(ToolError):
    """The address cannot be listened on (in use, not this machine's)."""


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to `host`:`port`, before anything loads; one line (`ListenError`) where it cannot be."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        bound = socket.socket(family, kind, protocol)
        bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        bound.bind(address)
    except OSError as error:
        raise ListenError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    return bound


def main(argv: list[str] | None = None) -> int:
    settings, args = parse_command_line(sys.argv[1:] if argv is None else list(argv))
    bound = listening_socket(args.host, args.port)
    import uvicorn

    from .app import build_app
    from .service import EmbeddingService

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=args.log_level.upper())
    failure: list[BaseException] = []
    server: uvicorn.Server | None = None

    def stop_on_load_failure(error: BaseException) -> None:
        failure.append(error)
        server.should_exit = True

    app = build_app(EmbeddingService(settings), on_load_failure=stop_on_load_failure, freeze_after_load=True)
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level=args.log_level, access_log=False, lifespan="on"
    )
    server = uvicorn.Server(config)
    # uvicorn handles SIGTERM and SIGINT itself (a graceful shutdown), then raises the signal again under the handler
    # it found: one that does nothing, so that the process ends with the server's status, not killed by the signal
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: None)
    server.run(sockets=[bound])
    if failure:
        error = failure[0]
        print(f"{command_as_typed(PROG)}: error: cannot serve {settings.model!r}: {one_line(error)}", file=sys.stderr)
        return 1
    return 0
