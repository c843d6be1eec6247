import flask

import keygate.flask


def create_app(kg: keygate.Keygate, **options) -> flask.Flask:
    app = flask.Flask(__name__)

    @app.get("/api/whoami")
    @keygate.flask.require_key(kg, **options)
    def whoami():
        return {"principal": flask.g.keygate}

    return app
