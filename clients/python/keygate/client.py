"""Keygate(url, token=None, timeout=2.0): verify and the key routes over kept-alive connections."""

from __future__ import annotations

import base64
import http.client
import json
import threading
import urllib.parse
from typing import Any


class KeygateError(Exception):
    """keygate answered a call with an error: its status, its sentence and its body."""

    def __init__(self, status: int, message: str, body: Any = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.body = body


class KeygateUnavailable(Exception):
    """keygate could not be asked: no connection, no answer in time, or a 5xx."""

    def __init__(self, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class _Pool:
    """A few kept-alive connections to one host, shared by threads."""

    def __init__(self, url: str, timeout: float, size: int):
        parts = urllib.parse.urlsplit(url)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.https else 80)
        self.base_path = parts.path.rstrip("/")
        self.timeout = timeout
        self.size = size
        self.idle: list[http.client.HTTPConnection] = []
        self.lock = threading.Lock()

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        with self.lock:
            if self.idle:
                return self.idle.pop(), True
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return kind(self.host, self.port, timeout=self.timeout), False

    def _release(self, connection: http.client.HTTPConnection) -> None:
        with self.lock:
            if len(self.idle) < self.size:
                self.idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for connection in idle:
            connection.close()

    def request(self, method: str, path: str, body: bytes | None, headers: dict[str, str]):
        """(status, headers, body bytes); a kept-alive connection the server closed is retried once."""
        for attempt in range(2):
            connection, reused = self._connection()
            try:
                connection.request(method, self.base_path + path, body=body, headers=headers)
                response = connection.getresponse()
                data = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as error:
                connection.close()
                if reused and attempt == 0:
                    continue
                raise KeygateUnavailable(f"keygate closed the connection: {error}") from error
            except (OSError, http.client.HTTPException) as error:
                connection.close()
                raise KeygateUnavailable(f"keygate cannot be reached: {error}") from error
            if response.will_close:
                connection.close()
            else:
                self._release(connection)
            return response.status, response.headers, data
        raise KeygateUnavailable("keygate closed the connection")


class Keygate:
    """A client of the keygate at `url` (BASE_PATH included). With `token`, the key routes are the
    /jwt ones (Bearer); with `key` and `secret`, the /key ones (Basic)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout: float = 2.0,
        *,
        key: str | None = None,
        secret: str | None = None,
        pool_size: int = 10,
    ):
        self.url = url.rstrip("/")
        self._pool = _Pool(self.url, timeout, pool_size)
        self._scheme = "key" if key is not None else "jwt"
        self._auth: dict[str, str] = {}
        if token is not None:
            self._auth["Authorization"] = f"Bearer {token}"
        if key is not None and secret is not None:
            basic = base64.b64encode(f"{key}:{secret}".encode()).decode()
            self._auth["Authorization"] = f"Basic {basic}"

    def close(self) -> None:
        """Closes the kept-alive connections (new calls open new ones)."""
        self._pool.close()

    def __enter__(self) -> Keygate:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def request(self, method: str, path: str, body: Any = None, query: dict | None = None, auth: bool = True):
        """One call: the JSON answer of a 2xx (None for 204), else KeygateError or KeygateUnavailable."""
        headers = dict(self._auth) if auth else {}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if query:
            pairs = {name: value for name, value in query.items() if value is not None}
            if pairs:
                path = f"{path}?{urllib.parse.urlencode(pairs)}"
        status, response_headers, data = self._pool.request(method, path, payload, headers)
        if status >= 500:
            retry_after = response_headers.get("Retry-After")
            raise KeygateUnavailable(
                f"keygate answered {status}", int(retry_after) if retry_after and retry_after.isdigit() else None
            )
        try:
            answer = json.loads(data) if data else None
        except ValueError as error:
            raise KeygateUnavailable(f"keygate answered {status} with a body that is not JSON") from error
        if status >= 400:
            message = answer.get("error") if isinstance(answer, dict) else None
            raise KeygateError(status, message or f"keygate answered {status}", answer)
        return answer

    def verify(
        self,
        *,
        key: str | None = None,
        secret: str | None = None,
        token: str | None = None,
        min_level: int | None = None,
        permissions: str | None = None,
        cost: int | None = None,
        client_ip: str | None = None,
    ) -> dict:
        """POST /apikeys/verify: the answer ({"valid", "code", "principal"?, ...})."""
        body: dict[str, Any] = {"token": token} if token is not None else {"key": key, "secret": secret}
        for name, value in (("minLevel", min_level), ("permissions", permissions), ("clientIp", client_ip)):
            if value is not None:
                body[name] = value
        if cost is not None and token is None:
            body["cost"] = cost
        return self.request("POST", "/apikeys/verify", body, auth=False)

    def create_key(self, name: str, level: int, expires_in: int, **settings: Any) -> dict:
        """A new key (settings as keygate names them: meta, enabled, ratelimit, credits, ...)."""
        body = {"name": name, "level": level, "expiresIn": expires_in, **settings}
        return self.request("POST", f"/apikeys/{self._scheme}", body)

    def list_keys(self, limit: int | None = None, cursor: str | None = None) -> dict:
        return self.request("GET", f"/apikeys/{self._scheme}", query={"limit": limit, "cursor": cursor})

    def get_key(self, key_id: str) -> dict:
        return self.request("GET", f"/apikeys/{_segment(key_id)}/{self._scheme}")

    def update_key(self, key_id: str, **changes: Any) -> dict:
        return self.request("PATCH", f"/apikeys/{_segment(key_id)}/{self._scheme}", changes)

    def rotate_key(self, key_id: str, **body: Any) -> dict:
        return self.request("POST", f"/apikeys/{_segment(key_id)}/rotate/{self._scheme}", body)

    def delete_key(self, key_id: str) -> None:
        self.request("DELETE", f"/apikeys/{_segment(key_id)}/{self._scheme}")

    def key_usage(self, key_id: str, **query: Any) -> dict:
        return self.request("GET", f"/apikeys/{_segment(key_id)}/usage/{self._scheme}", query=query)

    def health(self) -> dict:
        return self.request("GET", "/health", auth=False)


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")
