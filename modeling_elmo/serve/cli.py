"""
`elmo serve MODEL` (`elmo-serve`): the model served over HTTP by uvicorn on `--host` (127.0.0.1) and `--port`.

The server listens at once and loads the model in the background (`GET /health`: 503, then 200 once loaded and
warmed); a model that cannot load is one line on stderr and exit status 1. SIGTERM (and Ctrl-C) stops accepting
connections, answers every request already accepted, and exits 0.
"""

import logging
import signal
import sys

from ..commands.errors import command_as_typed, one_line
from .arguments import PROG, parse_command_line

LOG = logging.getLogger("modeling_elmo.serve")


def main(argv: list[str] | None = None) -> int:
    settings, args = parse_command_line(sys.argv[1:] if argv is None else list(argv))
    import uvicorn

    from .app import build_app
    from .service import EmbeddingService

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=args.log_level.upper())
    failure: list[BaseException] = []
    server: uvicorn.Server | None = None

    def stop_on_load_failure(error: BaseException) -> None:
        failure.append(error)
        server.should_exit = True

    app = build_app(EmbeddingService(settings), on_load_failure=stop_on_load_failure)
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level=args.log_level, access_log=False, lifespan="on"
    )
    server = uvicorn.Server(config)
    # uvicorn handles SIGTERM and SIGINT itself (a graceful shutdown), then raises the signal again under the handler
    # it found: one that does nothing, so that the process ends with the server's status, not killed by the signal
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: None)
    server.run()
    if failure:
        error = failure[0]
        print(f"{command_as_typed(PROG)}: error: cannot serve {settings.model!r}: {one_line(error)}", file=sys.stderr)
        return 1
    if not server.started:
        return 1  # uvicorn said why (the port in use, ...)
    return 0
