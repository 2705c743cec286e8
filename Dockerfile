# Optiboard on a CPU host: docker build -t optiboard . && docker run -p 8501:8501 --pids-limit 4096 \
#   --security-opt seccomp=unconfined --security-opt systempaths=unconfined -v $PWD/data:/app/data optiboard
# (--pids-limit: the image runs as root, for which the kernel enforces no RLIMIT_NPROC, so without
# cgroup access nothing else caps a sandboxed child's processes; docs/security.md)
# For a GPU host, build FROM an nvidia/cuda 13 runtime image with OPTIBOARD_REQUIREMENTS=requirements-gpu.txt.
FROM python:3.11-slim
ARG OPTIBOARD_REQUIREMENTS=requirements.txt
WORKDIR /app
# bubblewrap sandboxes SavedModel conversion, upload parsing, measurements and Triton servers.
# In the container it needs
#   docker run --security-opt seccomp=unconfined --security-opt systempaths=unconfined ...
# (user namespaces, and a fresh /proc mount that Docker's masked /proc paths otherwise forbid);
# without them the sandbox does not start and SavedModel uploads, measurements and serving are
# refused with that reason.
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*
COPY requirements*.txt ./
RUN python -m venv .venv && .venv/bin/pip install --no-cache-dir -r ${OPTIBOARD_REQUIREMENTS}
# The Triton serving environment (.triton-venv from Debian's python3.11, see scripts/setup-triton)
COPY scripts/setup-triton scripts/setup-triton
RUN scripts/setup-triton && rm -rf /var/lib/apt/lists/*
COPY . .
# bytecode for the sandboxed children, which cannot write it (scripts/setup-venv says why)
RUN .venv/bin/python -m compileall -q backend storage pages settings.py app.py serve.py >/dev/null
ENV OPTIBOARD_DATA_DIR=/app/data OPTIBOARD_ADDRESS=0.0.0.0 OPTIBOARD_PORT=8501
EXPOSE 8501
VOLUME /app/data
# The venv is already built, so scripts/run only starts the worker and the dashboard.
CMD ["scripts/run"]
