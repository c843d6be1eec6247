"""keygate's Python client: verify and the key routes (standard library only), a FastAPI dependency
(keygate.fastapi.require_key) and a Flask decorator (keygate.flask.require_key) over one decision table
(keygate.decision)."""

from .client import Keygate, KeygateError, KeygateUnavailable

__all__ = ["Keygate", "KeygateError", "KeygateUnavailable"]
