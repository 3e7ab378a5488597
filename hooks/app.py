"""The Flask app: POST /customize, /sync, /finalize, GET /healthz and /metrics (gunicorn).

Views only translate HTTP: parse the JSON body, hand it to the ``hooks.executor.Executor``
of the app's ``Runtime``, answer JSON. A malformed request gets a JSON 400; an unexpected error
a JSON 500 whose traceback goes to the server log only.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import orjson
import prometheus_client
from flask import Blueprint, Flask, Response, current_app, g, jsonify, request
from flask.json.provider import JSONProvider
from prometheus_client import CONTENT_TYPE_LATEST
from werkzeug.exceptions import HTTPException

from hooks.core.request import BadHookRequest
from hooks.executor import Executor
from hooks.runtime import Runtime
from hooks.settings import Settings

log = logging.getLogger(__name__)
bp = Blueprint("hooks", __name__)
HOOK_PATHS = frozenset({"/customize", "/sync", "/finalize"})


class FastJSON(JSONProvider):
    """orjson for request and response bodies: each sync parses and writes several KB."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        return orjson.dumps(obj).decode()

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return orjson.loads(s)

    def response(self, *args: Any, **kwargs: Any) -> Response:
        body = orjson.dumps(self._prepare_response_obj(args, kwargs))
        return Response(body, mimetype="application/json")


def create_app(settings: Settings | None = None, *, runtime: Runtime | None = None) -> Flask:
    """Build the app; gunicorn calls ``hooks.app:create_app()``."""
    app = Flask(__name__)
    app.json = FastJSON(app)
    runtime = runtime or Runtime.build(settings or Settings.from_env(os.environ))
    app.extensions["hpcbridge"] = Executor(runtime)
    app.register_blueprint(bp)
    app.register_error_handler(BadHookRequest, _bad_request)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _internal_error)
    return app


def _executor() -> Executor:
    executor: Executor = current_app.extensions["hpcbridge"]
    return executor


def _body() -> Any:
    body = request.get_json(silent=True)
    if body is None:
        raise BadHookRequest("the request body must be JSON")
    return body


@bp.post("/customize")
def customize() -> Response:
    return jsonify(_executor().customize(_body()))


@bp.post("/sync")
@bp.post("/finalize")
def sync() -> Response:
    return jsonify(_executor().sync(_body()))


@bp.get("/healthz")
def healthz() -> Response:
    return jsonify({"status": "ok"})


@bp.get("/metrics")
def metrics_page() -> Response:
    registry = _executor().runtime.metrics.registry
    return Response(prometheus_client.generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)


@bp.before_app_request
def _start_clock() -> None:
    g.started = time.perf_counter()


@bp.after_app_request
def _count(response: Response) -> Response:
    path = request.path
    if path in HOOK_PATHS:
        _executor().runtime.metrics.hook_answered(path[1:], response.status_code,
                                                  time.perf_counter() - g.started)
    return response


def _bad_request(err: BadHookRequest) -> tuple[Response, int]:
    return jsonify({"error": "bad request", "message": str(err)}), 400


def _http_error(err: HTTPException) -> tuple[Response, int]:
    return jsonify({"error": err.name, "message": err.description}), err.code or 500


def _internal_error(err: Exception) -> tuple[Response, int]:
    log.exception("hook %s failed", request.path)
    return jsonify({"error": "internal error", "message": "see the hook server's log"}), 500
