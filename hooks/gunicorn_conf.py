"""gunicorn settings for the hook server (``make run`` and the container use these).

gunicorn's own deployment: threaded workers (``gthread``) behind a proxy that reads every
request whole. In ``deploy/`` that proxy is nginx in the same Pod (``deploy/base/nginx.conf``):
it terminates TLS, requires Metacontroller's client certificate and enforces the header and body
timeouts and the body cap, so gunicorn sees only whole requests, on 127.0.0.1. The hooks spend
their time waiting on SSH, so one worker process serves them all, with ``HPCBRIDGE_THREADS``
threads: every sync then shares one set of SSH connections and one status cache per cluster.
A cluster that stalls holds at most its share of those threads (``hooks.admission``).
"""

import gc
import logging
import os

from hooks.auth import probes_port
from hooks.logformat import JSONFormatter, gunicorn_logconfig
from hooks.settings import Settings

workers = int(os.environ.get("HPCBRIDGE_WORKERS", "1"))
worker_class = "gthread"
threads = Settings.from_env(os.environ).threads
worker_connections = 1000
"""Connections one worker process keeps open at most."""
timeout = 60
"""Seconds a worker may fail to notify the master before the master restarts it."""
graceful_timeout = 30
keepalive = 75
"""Seconds an idle kept-alive connection stays open (Go's clients keep theirs for 90 s)."""
accesslog = os.environ.get("HPCBRIDGE_ACCESS_LOG") or None
access_log_format = '%(h)s %(l)s - %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'
"""gunicorn's default but for ``%(u)s``, the user part of a Basic credential: never logged."""
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


# --- the probes' port ----------------------------------------------------------------------
# HPCBRIDGE_METRICS_PORT adds a port of its own, in plain HTTP, that serves /healthz and /metrics
# only (the app refuses the hooks there): for the kubelet's probes and the scraper, which reach
# the Pod past nginx. The hook port stays on HOST (127.0.0.1 in the Pod: nginx's upstream).
host, metrics_port = os.environ.get("HOST", "127.0.0.1"), probes_port(os.environ)
probes_host = os.environ.get("HPCBRIDGE_METRICS_HOST") or host
bind = [f"{host}:{os.environ.get('PORT', '8080')}",
        *([f"{probes_host}:{metrics_port}"] if metrics_port else [])]
