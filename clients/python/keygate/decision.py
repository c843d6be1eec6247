"""The decision table shared by the FastAPI dependency and the Flask decorator, the same as
@keygate/client's decision.ts: what keygate said (a verify answer, or that it could not be asked)
becomes a status, headers and keygate's error body; and the credential read as keygate does."""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

UNAVAILABLE_RETRY_AFTER = 5
CHALLENGE = 'Bearer realm="keygate", Basic realm="keygate"'
MAX_CREDENTIAL_LENGTH = 8192

# Each verify code, its status and the sentence the client reads. Any other code: 403.
REFUSALS: dict[str, tuple[int, str]] = {
    "NOT_FOUND": (401, "The API key or secret is not valid."),
    "EXPIRED": (401, "The API key has expired."),
    "INVALID_TOKEN": (401, "The token is not valid."),
    "DISABLED": (403, "The API key is disabled."),
    "IP_NOT_ALLOWED": (403, "The API key may not be used from this address."),
    "INSUFFICIENT_LEVEL": (403, "The credential\u2019s level is too low for this route."),
    "INSUFFICIENT_PERMISSIONS": (403, "The credential lacks a permission this route needs."),
    "RATE_LIMITED": (429, "The API key\u2019s rate limit is used up: retry after Retry-After seconds."),
    "USAGE_EXCEEDED": (429, "The API key\u2019s credits are used up."),
}
UNKNOWN_CODE = (403, "The credential was refused.")


@dataclass
class Decision:
    passed: bool
    principal: dict | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""


def decide(outcome: dict, fail_open: bool = False, now: float | None = None) -> Decision:
    """outcome: {"kind": "answer", "answer": {...}} | {"kind": "missing"} | {"kind": "malformed"}
    | {"kind": "unavailable", "retry_after"?: n} | {"kind": "refused", "error": sentence}."""
    kind = outcome["kind"]
    if kind == "missing":
        return _deny(401, "An API key and secret, or a token, is required.", {"www-authenticate": CHALLENGE})
    if kind == "malformed":
        return _deny(401, "The credential is malformed.", {"www-authenticate": CHALLENGE})
    if kind == "unavailable":
        if fail_open:
            return Decision(passed=True)
        retry_after = outcome.get("retry_after") or UNAVAILABLE_RETRY_AFTER
        return _deny(
            503,
            "The API key service cannot be reached: retry after Retry-After seconds.",
            {"retry-after": str(retry_after)},
        )
    if kind == "refused":
        return _deny(500, f"The API key service refused the check: {outcome['error']}", {})
    return _decide_answer(outcome["answer"], time.time() if now is None else now)


def _decide_answer(answer: dict, now: float) -> Decision:
    headers: dict[str, str] = {}
    code = answer.get("code")
    limit = answer.get("ratelimit")
    if limit and code != "USAGE_EXCEEDED":
        _rate_limit_headers(limit, now, headers)
    if code == "VALID" and answer.get("valid") is True and answer.get("principal"):
        return Decision(passed=True, principal=answer["principal"], headers=headers)
    status, error = REFUSALS.get(code, UNKNOWN_CODE) if isinstance(code, str) else UNKNOWN_CODE
    if status == 401:
        headers["www-authenticate"] = CHALLENGE
    if code == "RATE_LIMITED":
        headers["retry-after"] = str(answer.get("retryAfter") or 1)
    if code == "USAGE_EXCEEDED":
        # Credits are a pool, not a window (see decision.ts): no RateLimit-Policy, the credits left and,
        # when a refill will come, when.
        retry_after = answer.get("retryAfter")
        remaining = (answer.get("credits") or {}).get("remaining", 0)
        headers["ratelimit"] = f'"credits";r={remaining}' + (f";t={retry_after}" if retry_after else "")
        if retry_after:
            headers["retry-after"] = str(retry_after)
    return _deny(status, error, headers)


def _rate_limit_headers(limit: dict, now: float, headers: dict[str, str]) -> None:
    reset = datetime.fromisoformat(limit["reset"].replace("Z", "+00:00")).timestamp()
    until_reset = max(0, math.ceil(reset - now))
    window = f";w={limit['duration']}" if "duration" in limit else ""
    headers["ratelimit-policy"] = f'"default";q={limit["limit"]}{window}'
    headers["ratelimit"] = f'"default";r={limit["remaining"]};t={until_reset}'


def _deny(status: int, error: str, headers: dict[str, str]) -> Decision:
    headers["content-type"] = "application/json"
    headers["cache-control"] = "no-store"
    return Decision(
        passed=False, status=status, headers=headers, body=json.dumps({"result": "error", "error": error})
    )


_BEARER = re.compile(r"^Bearer[ \t]+(\S+)[ \t]*$", re.IGNORECASE)
_BASIC = re.compile(r"^Basic[ \t]+([A-Za-z0-9+/]+={0,2})[ \t]*$", re.IGNORECASE)


def read_credential(header: Callable[[str], str | None]) -> dict:
    """{"token"} | {"key", "secret"} | an outcome ({"kind": "missing" | "malformed"}), as keygate reads it."""
    authorization = header("authorization")
    if authorization:
        if re.match(r"^bearer(\s|$)", authorization, re.IGNORECASE):
            match = _BEARER.match(authorization)
            return {"token": match.group(1)} if match else {"kind": "malformed"}
        if re.match(r"^basic(\s|$)", authorization, re.IGNORECASE):
            return _parse_basic(authorization)
    key, secret = header("x-api-key"), header("x-api-secret")
    if not key and not secret:
        return {"kind": "missing"}
    if not key or not secret:
        return {"kind": "malformed"}
    return {"key": key, "secret": secret}


def _parse_basic(authorization: str) -> dict:
    match = _BASIC.match(authorization)
    if not match or len(match.group(1)) % 4 != 0:
        return {"kind": "malformed"}
    try:
        decoded = base64.b64decode(match.group(1)).decode("latin-1")
    except (binascii.Error, ValueError):
        return {"kind": "malformed"}
    key, colon, secret = decoded.partition(":")
    if not colon or not key or not secret:
        return {"kind": "malformed"}
    return {"key": key, "secret": secret}


def check(
    kg: Any,
    header: Callable[[str], str | None],
    request: Any,
    address: str | None,
    *,
    min_level: int | None = None,
    permissions: str | Callable[[Any], str | None] | None = None,
    cost: int | None = None,
    fail_open: bool = False,
    client_ip: Callable[[Any], str | None] | bool | None = None,
) -> Decision:
    """One request through the guard: the credential, keygate's verify, the decision."""
    from .client import KeygateError, KeygateUnavailable

    credential = read_credential(header)
    if "kind" in credential:
        return decide(credential, fail_open)
    if sum(len(value) for value in credential.values()) > MAX_CREDENTIAL_LENGTH:
        return decide({"kind": "malformed"}, fail_open)
    query = permissions(request) if callable(permissions) else permissions
    ip = None if client_ip is False else client_ip(request) if callable(client_ip) else address
    try:
        answer = kg.verify(
            **credential, min_level=min_level, permissions=query or None, cost=cost, client_ip=ip or None
        )
    except KeygateUnavailable as error:
        return decide({"kind": "unavailable", "retry_after": error.retry_after}, fail_open)
    except KeygateError as error:
        return decide({"kind": "refused", "error": error.message}, fail_open)
    if not isinstance(answer, dict) or not isinstance(answer.get("code"), str):
        return decide({"kind": "unavailable"}, fail_open)
    return decide({"kind": "answer", "answer": answer}, fail_open)
