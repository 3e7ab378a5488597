"""gunicorn settings for the hook server (``make run`` and the container use these).

The hooks spend their time waiting on SSH, so one worker process runs many threads: every
sync in the server then shares one set of SSH connections and one status cache per cluster.
"""

import gc
import logging
import os

from hooks.logformat import JSONFormatter

bind = f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8080')}"
workers = int(os.environ.get("HPCBRIDGE_WORKERS", "1"))
worker_class = "gthread"
threads = int(os.environ.get("HPCBRIDGE_THREADS", "16"))
timeout = 60
graceful_timeout = 30
keepalive = 75
accesslog = os.environ.get("HPCBRIDGE_ACCESS_LOG") or None
errorlog = "-"
loglevel = os.environ.get("HPCBRIDGE_LOG_LEVEL", "info")
logformat = os.environ.get("HPCBRIDGE_LOG_FORMAT", "text")
if logformat not in ("text", "json"):
    raise ValueError(f"HPCBRIDGE_LOG_FORMAT={logformat!r} is not text or json")
# gunicorn's control socket (under $XDG_RUNTIME_DIR or $HOME/.gunicorn) is not used: in the
# image HOME is read-only, and locally every server would share one socket.
control_socket_disable = True


def post_worker_init(worker: object) -> None:
    """Once the app is loaded: move what the imports and the app created out of the garbage
    collector's reach, so that its full collections scan only what requests create (they
    otherwise stall every thread for tens of milliseconds); and send the hooks' own log lines
    (and paramiko's critical ones: hooks.ssh reports its failures) to stderr with gunicorn's.
    In JSON, every hook call is a line of its own; in text, only at the debug level
    (gunicorn's access log has them otherwise)."""
    gc.collect()
    gc.freeze()
    handler = logging.StreamHandler()
    handler.setFormatter(JSONFormatter() if logformat == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # The per-call records are emitted at INFO: shown in JSON, and in text only at debug.
    calls = "INFO" if logformat == "json" or loglevel.upper() == "DEBUG" else "WARNING"
    for name, level in (("hooks", loglevel.upper()), ("paramiko", "CRITICAL")):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
    logging.getLogger("hooks.calls").setLevel(calls)


# --- TLS, client certificates and the metrics port (README "Security") ----------------------
# HPCBRIDGE_TLS_CERT and HPCBRIDGE_TLS_KEY (PEM files) serve the hooks over HTTPS; unset, the
# server speaks plain HTTP (`make run`). HPCBRIDGE_TLS_CLIENT_CA makes gunicorn ask every client
# for a certificate and fail the handshake on one that this CA did not sign. It does not make
# one compulsory (CERT_OPTIONAL): the kubelet presents none when it probes /healthz. The app
# itself refuses every other path to a connection without one (hooks/auth.py, which reads the
# same variable). gunicorn builds the TLS context from the files for each new connection, so a
# renewed certificate or CA is used without a restart. HPCBRIDGE_METRICS_PORT serves /metrics
# once more on a port of its own, in plain HTTP, for the scraper alone (started by the
# post_worker_init hook above, which this block wraps).


def _tls() -> tuple[str | None, str | None, str | None, int]:
    import ssl

    cert, key, client_ca = (os.environ.get(f"HPCBRIDGE_TLS_{name}") or None
                            for name in ("CERT", "KEY", "CLIENT_CA"))
    if (cert is None) != (key is None):
        raise ValueError("set HPCBRIDGE_TLS_CERT and HPCBRIDGE_TLS_KEY together, or neither")
    if client_ca is not None and cert is None:
        raise ValueError("HPCBRIDGE_TLS_CLIENT_CA needs HPCBRIDGE_TLS_CERT and HPCBRIDGE_TLS_KEY")
    return cert, key, client_ca, ssl.CERT_OPTIONAL if client_ca else ssl.CERT_NONE


def _metrics_port() -> int | None:
    text = os.environ.get("HPCBRIDGE_METRICS_PORT") or None
    if text is None:
        return None
    if not text.isdigit() or not 0 < int(text) < 65536 or text == os.environ.get("PORT", "8080"):
        raise ValueError(f"HPCBRIDGE_METRICS_PORT={text!r} is not a free port number beside PORT")
    return int(text)


certfile, keyfile, ca_certs, cert_reqs = _tls()
metrics_host, metrics_port = os.environ.get("HOST", "127.0.0.1"), _metrics_port()


def _serve_metrics(worker: object) -> None:
    """Serve the app's own registry (the one behind its /metrics) on the metrics port. With
    several worker processes only the first to start gets the port: like the hook port's
    /metrics, it shows one worker's counts."""
    if metrics_port is None:
        return
    from prometheus_client import start_http_server

    app = getattr(worker, "wsgi", None)  # the Flask app, loaded before post_worker_init
    registry = app.extensions["hpcbridge"].runtime.metrics.registry  # type: ignore[union-attr]
    try:
        start_http_server(metrics_port, addr=metrics_host, registry=registry)
    except OSError as error:
        logging.getLogger("hooks").warning("metrics are not served on port %d: %s",
                                           metrics_port, error)


def _post_worker_init_and_metrics(worker: object) -> None:
    _worker_post_worker_init(worker)
    _serve_metrics(worker)


_worker_post_worker_init = post_worker_init
post_worker_init = _post_worker_init_and_metrics
# --- end of TLS, client certificates and the metrics port -----------------------------------
