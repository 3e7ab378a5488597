"""gunicorn settings for the hook server (``make run`` and the container use these).

The hooks spend their time waiting on SSH, so one worker process serves them all: every sync
then shares one set of SSH connections and one status cache per cluster. Its worker class is
the product's front (``hooks.server``): an asyncio loop reads every request whole, within the
header and body deadlines, answers /healthz itself, and hands the hook calls to a bounded set of
threads (``HPCBRIDGE_THREADS``, at most ``HPCBRIDGE_CLUSTER_THREADS`` per cluster), so that
neither slow clients nor a cluster that does not answer can take the server down.
"""

import gc
import logging
import os

from hooks.logformat import JSONFormatter, gunicorn_logconfig
from hooks.server import probe_port

workers = int(os.environ.get("HPCBRIDGE_WORKERS", "1"))
worker_class = "hooks.server.Worker"
worker_connections = 1000
"""Connections one worker process keeps open at most; one more is closed at once."""
timeout = 60
"""Seconds the worker's loop may stall before the master restarts the worker."""
graceful_timeout = 30
keepalive = 75
"""Seconds an idle kept-alive connection stays open (Go's clients keep theirs for 90 s)."""
accesslog = os.environ.get("HPCBRIDGE_ACCESS_LOG") or None
errorlog = "-"
loglevel = os.environ.get("HPCBRIDGE_LOG_LEVEL", "info")
logformat = os.environ.get("HPCBRIDGE_LOG_FORMAT", "text")
if logformat not in ("text", "json"):
    raise ValueError(f"HPCBRIDGE_LOG_FORMAT={logformat!r} is not text or json")
logconfig_dict = gunicorn_logconfig(logformat, loglevel, accesslog)
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


# --- TLS, client certificates and the probes' port (README "Security") ----------------------
# HPCBRIDGE_TLS_CERT and HPCBRIDGE_TLS_KEY (PEM files) serve the hooks over HTTPS; unset, the
# server speaks plain HTTP (`make run`). HPCBRIDGE_TLS_CLIENT_CA makes the TLS handshake on the
# hook port require a client certificate that this CA signed (CERT_REQUIRED): a client without
# one never reaches the HTTP layer. The app checks the verified certificate once more
# (hooks/auth.py, which reads the same variable). The server builds the TLS context again when
# a file changes, so a renewed certificate or CA is used without a restart. HPCBRIDGE_METRICS_PORT
# adds a port of its own, in plain HTTP, that serves /healthz and /metrics only: for the
# kubelet's probes, which present no client certificate, and for the scraper.


def _tls() -> tuple[str | None, str | None, str | None, int]:
    import ssl

    cert, key, client_ca = (os.environ.get(f"HPCBRIDGE_TLS_{name}") or None
                            for name in ("CERT", "KEY", "CLIENT_CA"))
    if (cert is None) != (key is None):
        raise ValueError("set HPCBRIDGE_TLS_CERT and HPCBRIDGE_TLS_KEY together, or neither")
    if client_ca is not None and cert is None:
        raise ValueError("HPCBRIDGE_TLS_CLIENT_CA needs HPCBRIDGE_TLS_CERT and HPCBRIDGE_TLS_KEY")
    return cert, key, client_ca, ssl.CERT_REQUIRED if client_ca else ssl.CERT_NONE


certfile, keyfile, ca_certs, cert_reqs = _tls()
host, metrics_port = os.environ.get("HOST", "127.0.0.1"), probe_port(os.environ)
bind = [f"{host}:{os.environ.get('PORT', '8080')}",
        *([f"{host}:{metrics_port}"] if metrics_port else [])]
# --- end of TLS, client certificates and the probes' port -----------------------------------
