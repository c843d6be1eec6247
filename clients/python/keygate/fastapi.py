"""FastAPI: Depends(keygate.fastapi.require_key(kg, min_level=…, permissions=…, cost=…)); the
dependency's value is the principal. The client's address is request.client.host (behind a proxy, run
uvicorn with --proxy-headers and --forwarded-allow-ips, which set it from the headers you trust)."""

from __future__ import annotations

from typing import Any, Callable

from fastapi import Request, Response
from starlette.exceptions import HTTPException

from .decision import Decision, check


class KeygateDenied(HTTPException):
    """A refusal: answered with keygate's error body by the handler this module installs."""

    def __init__(self, decision: Decision):
        super().__init__(decision.status, detail=decision.body, headers=decision.headers)
        self.decision = decision


async def keygate_denied_handler(_request: Request, exc: KeygateDenied) -> Response:
    return Response(exc.decision.body, status_code=exc.decision.status, headers=exc.decision.headers)


def install(app: Any) -> None:
    """Registers the handler that answers a KeygateDenied with keygate's body; require_key calls it on
    the first refusal, into the running exception middleware too (a FastAPI app builds its middleware
    once). Without it the status and headers are right but the body is FastAPI's {"detail": …}."""
    if KeygateDenied not in app.exception_handlers:
        app.add_exception_handler(KeygateDenied, keygate_denied_handler)
    layer = getattr(app, "middleware_stack", None)
    for _ in range(32):
        handlers = getattr(layer, "_exception_handlers", None)
        if isinstance(handlers, dict):
            handlers.setdefault(KeygateDenied, keygate_denied_handler)
            return
        layer = getattr(layer, "app", None)
        if layer is None:
            return


def require_key(
    kg: Any,
    min_level: int | None = None,
    permissions: str | Callable[[Request], str | None] | None = None,
    cost: int | None = None,
    fail_open: bool = False,
    client_ip: Callable[[Request], str | None] | bool | None = None,
):
    # A plain function: FastAPI runs it in its thread pool, so the blocking verify call never stalls
    # the event loop.
    def keygate_principal(request: Request, response: Response) -> dict | None:
        decision = check(
            kg,
            request.headers.get,
            request,
            request.client.host if request.client else None,
            min_level=min_level,
            permissions=permissions,
            cost=cost,
            fail_open=fail_open,
            client_ip=client_ip,
        )
        if not decision.passed:
            install(request.app)
            raise KeygateDenied(decision)
        for name, value in decision.headers.items():
            response.headers[name] = value
        return decision.principal

    return keygate_principal
