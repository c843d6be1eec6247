"""test/clients/cases.json, the one table of middleware behaviour, for FastAPI and Flask: each row builds
the framework's guarded app (examples/integrate/) with the row's options, serves it on 127.0.0.1 and
sends the row's request, against the keygate and stubs that test/clients/python.test.ts started (their
URLs and a token of user 42 in the environment)."""

import base64
import json
import os
import re
import socket
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT / "clients" / "python"), str(ROOT / "examples" / "integrate")]

import keygate  # noqa: E402

TABLE = json.loads((ROOT / "test" / "clients" / "cases.json").read_text())
URL = os.environ["KEYGATE_URL"]
TOKEN = os.environ["KEYGATE_TOKEN"]
STUBS = json.loads(os.environ["KEYGATE_STUBS"])


def serve_fastapi(app):
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="error", lifespan="off")
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.005)

    def close():
        server.should_exit = True
        thread.join()
        sock.close()

    return f"http://127.0.0.1:{sock.getsockname()[1]}", close


def serve_flask(app):
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()

    def close():
        server.shutdown()
        thread.join()

    return f"http://127.0.0.1:{server.server_port}", close


def fastapi_app(kg, options):
    from fastapi_app import create_app

    return create_app(kg, **options)


def flask_app(kg, options):
    from flask_app import create_app

    return create_app(kg, **options)


FRAMEWORKS = {"FastAPI": (fastapi_app, serve_fastapi), "Flask": (flask_app, serve_flask)}


def fetch(url, headers):
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers, json.loads(error.read())


def credential_for(row):
    kind = row["credential"]
    if kind == "none":
        return {}
    if kind == "token":
        return {"Authorization": f"Bearer {TOKEN}"}
    if kind == "invalid-token":
        return {"Authorization": "Bearer not.a.token"}
    if kind == "malformed-basic":
        return {"Authorization": "Basic !!!"}
    if kind == "key-without-secret":
        return {"X-API-Key": "kg_0123456789abcdefghijkl"}
    body = {"level": 3, "expiresIn": 3600, **(row.get("key") or {})}
    with keygate.Keygate(URL, token=TOKEN) as owner:
        created = owner.create_key(row["name"], body.pop("level"), body.pop("expiresIn"), **body)["apikey"]
    if row.get("key", {}).get("expiresIn") == 1:
        expires = datetime.fromisoformat(created["expiresAt"].replace("Z", "+00:00")).timestamp()
        time.sleep(max(0, expires - time.time() + 0.02))
    secret = created["secret"] + ("x" if kind == "wrong-secret" else "")
    if kind == "headers":
        return {"X-API-Key": created["key"], "X-API-Secret": secret}
    basic = base64.b64encode(f"{created['key']}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {basic}"}


def options_for(row):
    given = row.get("options") or {}
    options = {}
    if "minLevel" in given:
        options["min_level"] = given["minLevel"]
    if "permissions" in given:
        options["permissions"] = given["permissions"]
    if "permissionsByMethod" in given:
        options["permissions"] = lambda request: given["permissionsByMethod"].get(request.method)
    if "cost" in given:
        options["cost"] = given["cost"]
    if "failOpen" in given:
        options["fail_open"] = given["failOpen"]
    return options


class MiddlewareTable(unittest.TestCase):
    def test_every_row_in_every_framework(self):
        for framework, (build, serve) in FRAMEWORKS.items():
            for row in TABLE["cases"]:
                with self.subTest(framework=framework, row=row["name"]):
                    self.run_row(build, serve, row)

    def run_row(self, build, serve, row):
        target = row.get("keygate", "real")
        url = URL if target == "real" else STUBS[target]
        timeout = (row.get("options") or {}).get("timeoutMs", 2000) / 1000
        kg = keygate.Keygate(url, timeout=timeout)
        headers = credential_for(row)
        base, close = serve(build(kg, options_for(row)))
        try:
            for _ in range(row.get("warmup", 0)):
                self.assertEqual(fetch(f"{base}/api/whoami", headers)[0], 200)
            status, response_headers, body = fetch(f"{base}/api/whoami", headers)
            expected = row["expect"]
            self.assertEqual(status, expected["status"], body)
            for name, pattern in (expected.get("headers") or {}).items():
                value = response_headers.get(name)
                if pattern is None:
                    self.assertIsNone(value, name)
                else:
                    self.assertIsNotNone(value, name)
                    self.assertRegex(value, re.compile(pattern), name)
            if status == 200:
                if expected.get("principal", "absent") is None:
                    self.assertEqual(body, {"principal": None})
                elif expected.get("principal"):
                    for name, value in expected["principal"].items():
                        self.assertEqual(body["principal"].get(name), value, name)
            else:
                self.assertTrue(response_headers.get("content-type", "").startswith("application/json"))
                self.assertEqual(set(body), {"result", "error"})
                self.assertEqual(body["result"], "error")
                self.assertIsInstance(body["error"], str)
        finally:
            close()
            kg.close()


if __name__ == "__main__":
    unittest.main()
