"""Flask: @keygate.flask.require_key(kg, min_level=…, permissions=…, cost=…) on a view; the principal is
flask.g.keygate. The client's address is request.remote_addr (behind a proxy, wrap the app in
werkzeug's ProxyFix, which sets it from the proxy's headers you trust)."""

from __future__ import annotations

import functools
from typing import Any, Callable

import flask

from .decision import check


def require_key(
    kg: Any,
    min_level: int | None = None,
    permissions: str | Callable[[Any], str | None] | None = None,
    cost: int | None = None,
    fail_open: bool = False,
    client_ip: Callable[[Any], str | None] | bool | None = None,
):
    def decorator(view):
        @functools.wraps(view)
        def guarded(*args, **kwargs):
            request = flask.request
            decision = check(
                kg,
                request.headers.get,
                request,
                request.remote_addr,
                min_level=min_level,
                permissions=permissions,
                cost=cost,
                fail_open=fail_open,
                client_ip=client_ip,
            )
            if not decision.passed:
                return flask.Response(decision.body, status=decision.status, headers=decision.headers)
            flask.g.keygate = decision.principal
            response = flask.make_response(view(*args, **kwargs))
            response.headers.update(decision.headers)
            return response

        return guarded

    return decorator
