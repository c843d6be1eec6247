from fastapi import Depends, FastAPI

import keygate.fastapi


def create_app(kg: keygate.Keygate, **options) -> FastAPI:
    app = FastAPI()

    @app.get("/api/whoami")
    def whoami(principal=Depends(keygate.fastapi.require_key(kg, **options))):
        return {"principal": principal}

    return app
