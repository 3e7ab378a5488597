FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MALLOC_ARENA_MAX=2 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY hooks/ hooks/

# The hook server and the log fetcher (python -m hooks.logs, the log Pods' command).
USER 65532:65532
EXPOSE 8080
CMD ["gunicorn", "-c", "python:hooks.gunicorn_conf", "hooks.app:create_app()"]
