"""The floor under `gateway.py`'s Switchyard rows: a bare Litestar app that forwards a chat completion to the
upstream and returns its answer, on the same server (uvicorn with uvloop and httptools) and upstream client
(aiohttp) as Switchyard, without authentication, admission, validation or metering. What Switchyard costs beyond
this is what the gateway itself adds.

    GATEWAY_FLOOR_UPSTREAM=http://127.0.0.1:PORT/v1 python -m uvicorn --app-dir benchmarks gateway_floor:app
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from litestar import Litestar, Request, Response, post


@asynccontextmanager
async def _upstream(app: Litestar) -> AsyncIterator[None]:
    app.state.upstream = aiohttp.ClientSession()
    app.state.chat_url = os.environ["GATEWAY_FLOOR_UPSTREAM"].rstrip("/") + "/chat/completions"
    try:
        yield
    finally:
        await app.state.upstream.close()


@post("/v1/chat/completions", status_code=200)
async def forward(request: Request[object, object, object]) -> Response[bytes]:
    upstream: aiohttp.ClientSession = request.app.state.upstream
    headers = {"content-type": "application/json"}
    async with upstream.post(request.app.state.chat_url, data=await request.body(), headers=headers) as answer:
        return Response(await answer.read(), status_code=answer.status, media_type="application/json")


app = Litestar(route_handlers=[forward], lifespan=[_upstream])
