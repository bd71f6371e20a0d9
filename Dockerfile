# dscan scan service: one image for the API and the workers (docker-compose.yml picks the command).
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY scanner_service ./scanner_service
COPY api ./api
COPY workers ./workers
RUN pip install ".[service]" \
    && useradd --system --uid 10001 --home-dir /app dscan

USER dscan
EXPOSE 8000
# The API by default; the worker service overrides the command.
CMD ["uvicorn", "api.app:create_app", "--factory", "--host", "0.0.0.0", "--port", "8000", "--no-access-log"]
