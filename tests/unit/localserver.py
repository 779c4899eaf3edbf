"""A real aiohttp server on a free local port, for the client's own tests.

Why it exists: the client's bodies, errors and connection pool are tested over a real
socket (aiohttp's own parsing, chunking and pooling), not a fake of our Protocol; every
such test needs the same few lines to start one and stop it. It must never reach
anything but 127.0.0.1.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextlib.asynccontextmanager
async def serving(routes: Mapping[tuple[str, str], Handler]) -> AsyncIterator[str]:
    """Serve `routes` ((method, path) to handler); yield the server's base URL."""
    app = web.Application()
    for (method, path), handler in routes.items():
        app.router.add_route(method, path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
