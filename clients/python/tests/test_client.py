"""The Python client against the real keygate: the key routes round trip, errors are KeygateError with
keygate's status and sentence, an unreachable keygate is KeygateUnavailable, and twenty verify calls
share one kept-alive connection (counted by a TCP relay in front of keygate)."""

import os
import socket
import sys
import threading
import unittest
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import keygate  # noqa: E402

URL = os.environ["KEYGATE_URL"]
TOKEN = os.environ["KEYGATE_TOKEN"]


class Relay:
    """Accepts connections, counts them, and pipes each to keygate."""

    def __init__(self, target):
        parts = urllib.parse.urlsplit(target)
        self.target = (parts.hostname, parts.port)
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            upstream = socket.create_connection(self.target)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self.pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def pipe(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()


class ClientTest(unittest.TestCase):
    def test_key_routes_round_trip(self):
        kg = keygate.Keygate(URL, token=TOKEN)
        created = kg.create_key("python", 2, 600, meta={"team": "py"})["apikey"]
        self.assertEqual(kg.get_key(created["key"])["apikey"]["meta"], {"team": "py"})
        self.assertIn(created["key"], [key["key"] for key in kg.list_keys(limit=100)["apikeys"]])
        self.assertEqual(kg.update_key(created["key"], name="renamed")["apikey"]["name"], "renamed")
        answer = kg.verify(key=created["key"], secret=created["secret"], min_level=1)
        self.assertEqual((answer["valid"], answer["code"]), (True, "VALID"))
        self.assertEqual(kg.verify(key=created["key"], secret="wrong")["code"], "NOT_FOUND")
        rotated = kg.rotate_key(created["key"])["apikey"]
        self.assertEqual(kg.key_usage(rotated["key"])["usage"], [])
        kg.delete_key(rotated["key"])
        with self.assertRaises(keygate.KeygateError) as raised:
            kg.get_key(rotated["key"])
        self.assertEqual(raised.exception.status, 404)
        self.assertEqual(raised.exception.body["result"], "error")
        self.assertEqual(kg.health(), {"status": "ok"})

    def test_a_key_uses_the_key_routes(self):
        created = keygate.Keygate(URL, token=TOKEN).create_key("parent", 3, 600)["apikey"]
        as_key = keygate.Keygate(URL, key=created["key"], secret=created["secret"])
        child = as_key.create_key("child", 2, 60)["apikey"]
        self.assertEqual(as_key.get_key(child["key"])["apikey"]["level"], 2)

    def test_unreachable_keygate(self):
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        listener.close()
        with self.assertRaises(keygate.KeygateUnavailable):
            keygate.Keygate(f"http://127.0.0.1:{port}").verify(token="t")

    def test_twenty_verify_calls_share_one_connection(self):
        relay = Relay(URL)
        kg = keygate.Keygate(relay.url)
        for _ in range(20):
            self.assertEqual(kg.verify(token="not.a.token")["code"], "INVALID_TOKEN")
        self.assertEqual(relay.connections, 1)
        relay.listener.close()


if __name__ == "__main__":
    unittest.main()
