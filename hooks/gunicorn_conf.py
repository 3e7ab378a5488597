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
    calls = "INFO" if logformat == "json" else "DEBUG"
    for name, level in (("hooks", loglevel.upper()), ("paramiko", "CRITICAL")):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
    logging.getLogger("hooks.calls").setLevel(max(logging.getLevelName(calls),
                                                  logging.getLevelName(loglevel.upper())))
