"""The Flask app: POST /customize, /sync, /finalize, GET /healthz and /metrics (gunicorn).

Views only translate HTTP: parse the JSON body, hand it to the ``hooks.executor.Executor``
of the app's ``Runtime``, answer JSON. A malformed request gets a JSON 400; an unexpected error
a JSON 500 whose traceback goes to the server log only.
"""

from __future__ import annotations

import json
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

from hooks import auth, logformat
from hooks.core.values.text import shown
from hooks.core.wire.request import BadHookRequest
from hooks.executor import Executor
from hooks.metrics import hook_outcome
from hooks.runtime import Runtime
from hooks.settings import Settings

log = logging.getLogger(__name__)
calls = logging.getLogger("hooks.calls")
bp = Blueprint("hooks", __name__)
HOOK_PATHS = frozenset({"/customize", "/sync", "/finalize"})


class FastJSON(JSONProvider):
    """orjson for request and response bodies: each sync parses and writes several KB."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        return orjson.dumps(obj).decode()

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return orjson.loads(s)

    def response(self, *args: Any, **kwargs: Any) -> Response:
        obj = self._prepare_response_obj(args, kwargs)
        try:
            body = orjson.dumps(obj)
        except TypeError:  # a lone surrogate or a huge number from the request, echoed back
            body = json.dumps(obj).encode()
        return Response(body, mimetype="application/json")


def create_app(settings: Settings | None = None, *, runtime: Runtime | None = None) -> Flask:
    """Build the app; gunicorn calls ``hooks.app:create_app()``."""
    app = Flask(__name__)
    app.json = FastJSON(app)
    runtime = runtime or Runtime.build(settings or Settings.from_env(os.environ))
    # A larger body is answered 413 before it is read: one 100 MB request took the worker from
    # 54 to 371 MiB.
    app.config["MAX_CONTENT_LENGTH"] = runtime.settings.max_body
    app.extensions["hpcbridge"] = Executor(runtime)
    # the token file is read once
    app.extensions["hpcbridge.auth"] = auth.ClientRequirements.from_env(os.environ)
    app.register_blueprint(bp)
    app.register_error_handler(BadHookRequest, _bad_request)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _internal_error)
    return app


def _executor() -> Executor:
    executor: Executor = current_app.extensions["hpcbridge"]
    return executor


def _body() -> Any:
    if not request.is_json:
        raise BadHookRequest(
            f"the request's Content-Type is {shown(request.mimetype)}, not application/json"
            if request.mimetype else "the request has no Content-Type: application/json header")
    body = request.get_json(silent=True)
    if body is None:
        raise BadHookRequest("the request body is not a JSON object")
    g.body = body
    return body


@bp.post("/customize")
def customize() -> Response:
    return jsonify(_executor().customize(_body()))


@bp.post("/sync")
@bp.post("/finalize")
def sync() -> Response:
    answer = _executor().sync(_body())
    status = answer["status"]
    g.phase, g.reason = status.get("phase"), status.get("reason")
    g.scheduler_reason = status.get("schedulerReason")
    return jsonify(answer)


@bp.get("/healthz")
def healthz() -> Response:
    return jsonify({"status": "ok"})


@bp.get("/metrics")
def metrics_page() -> Response:
    registry = _executor().runtime.metrics.registry
    return Response(prometheus_client.generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


@bp.before_app_request
def _start_clock() -> None:
    g.started = time.perf_counter()
    logformat.begin_call()


OPEN_VIEWS = frozenset({"hooks.healthz", "hooks.metrics_page"})


@bp.before_app_request
def _authenticate() -> tuple[Response, int] | None:
    """Every view but /healthz and /metrics needs what ``hooks.auth`` requires (the bearer
    token), and is not served on the probes' port; keyed by the matched view, not the path's
    text."""
    if request.endpoint in OPEN_VIEWS:
        return None
    required: auth.ClientRequirements = current_app.extensions["hpcbridge.auth"]
    if required.on_probes_port(request.environ):
        return jsonify({"error": "not found", "message": "the probes' port serves /healthz "
                        "and /metrics only"}), 404
    refused = required.refusal(request.headers.get("Authorization"))
    if refused is None:
        return None
    response = jsonify({"error": "unauthorized", "message": refused})
    if required.token is not None:
        response.headers["WWW-Authenticate"] = 'Bearer realm="hpcbridge"'
    return response, 401


@bp.after_app_request
def _count(response: Response) -> Response:
    path = request.path
    if path in HOOK_PATHS:
        seconds = time.perf_counter() - g.started
        _executor().runtime.metrics.hook_answered(path[1:], response.status_code, seconds)
        _log_call(path[1:], response.status_code, seconds)
    return response


def _log_call(hook: str, code: int, seconds: float) -> None:
    """One record per hook call (``hooks.calls``; a JSON line with HPCBRIDGE_LOG_FORMAT=json)."""
    if not calls.isEnabledFor(logging.INFO):
        logformat.end_call()
        return
    body = g.get("body")
    parent = body.get("parent", body.get("object")) if isinstance(body, dict) else None
    meta = parent.get("metadata") if isinstance(parent, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    batchjob = "/".join(str(meta.get(k, "?"))[:253] for k in ("namespace", "name"))
    outcome = hook_outcome(code)
    commands = logformat.end_call()
    fields = {"hook": hook, "batchjob": batchjob, "outcome": outcome, "code": code,
              "duration_ms": round(seconds * 1000, 1), "phase": g.get("phase"),
              "reason": g.get("reason"), "remote_commands": commands}
    if g.get("scheduler_reason"):
        fields["scheduler_reason"] = g.scheduler_reason
    calls.info("%s %s: %s in %.1f ms, %d remote commands", hook, batchjob, outcome,
               seconds * 1000, len(commands), extra={"call": fields})


def _bad_request(err: BadHookRequest) -> tuple[Response, int]:
    return jsonify({"error": "bad request", "message": str(err)}), 400


def _http_error(err: HTTPException) -> tuple[Response, int]:
    return jsonify({"error": err.name, "message": err.description}), err.code or 500


def _internal_error(err: Exception) -> tuple[Response, int]:
    log.exception("hook %s failed", request.path)
    return jsonify({"error": "internal error", "message": "see the hook server's log"}), 500
