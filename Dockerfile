# The monitor's image: Debian 12's Python 3.11 and Java 17 runtime, this project with its runtime
# dependencies only (no test extras), user 185 (Spark's convention, the chart's runAsUser), and
# nothing written outside /tmp and the mounted volumes, so it runs with a read-only root
# filesystem. `rebalance-monitor` is the entrypoint: `docker run IMAGE demo --once`,
# `IMAGE run --config /etc/rebalance-monitor/monitor.toml`; `driver` and `executor` (what
# spark-operator passes) start Spark's Kubernetes driver or executor instead (image-entrypoint).
# Build: scripts/build-image (buildah or docker); the Helm chart's defaults point at the tag it
# gives, rebalance-monitor:<chart appVersion> (helm/README.md, "The image").
ARG BASE=debian:bookworm-slim
FROM ${BASE}

ARG DEBIAN_FRONTEND=noninteractive
# ca-certificates: TLS to Kafka; procps: Spark's scripts call ps; tini: signals and zombies.
# Versions are those of the Debian release (its security updates included), not pinned.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      python3 python3-venv openjdk-17-jre-headless ca-certificates procps tini \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
 && groupadd --gid 185 rebalance-monitor \
 && useradd --uid 185 --gid 185 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin rebalance-monitor

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Dependencies first (their layer survives source changes): the runtime list of pyproject.toml
# and its build requirement (setuptools), so that installing the project needs no network.
# The optional build secret `pip_cert` is a CA bundle for pip (a TLS-intercepting proxy; see
# scripts/build-image); it is mounted for this step only, never stored in the image.
COPY pyproject.toml /opt/rebalance-monitor/pyproject.toml
RUN --mount=type=secret,id=pip_cert \
    if [ -s /run/secrets/pip_cert ]; then export PIP_CERT=/run/secrets/pip_cert; fi \
 && python3 -m venv "$VIRTUAL_ENV" \
 && python3 -c 'import tomllib; t = tomllib.load(open("/opt/rebalance-monitor/pyproject.toml", "rb")); print("\n".join(t["project"]["dependencies"] + t["build-system"]["requires"]))' \
      > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

# The project (editable: the demo finds its captures under /opt/rebalance-monitor/tests/fixtures),
# scripts/spark_entrypoint.py for the SparkApplication's mainApplicationFile, byte-compiled at
# build time because nothing can be written at run time.
# What is copied is listed in .dockerignore: the packages, README.md, the two scripts and the
# demo's captures.
COPY . /opt/rebalance-monitor/
# The .pth file of streaming/spark/zip_imports.py: Spark's Python processes import the compiled
# pyspark of site-packages instead of compiling the one in SPARK_HOME's pyspark.zip each time.
RUN pip install --no-deps --no-build-isolation -e /opt/rebalance-monitor \
 && python3 -m compileall -q /opt/rebalance-monitor/state /opt/rebalance-monitor/streaming /opt/rebalance-monitor/sinks \
 && python3 -c 'from streaming.spark.zip_imports import install_pth; install_pth()' \
 && SPARK_HOME="$(python3 -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')" \
 && ln -s "$SPARK_HOME" /opt/spark

# Writable places: /tmp (HOME, java.io.tmpdir, Spark's local dirs) and the volumes the chart
# mounts (/var/lib/rebalance-monitor for the checkpoint, /var/data/spark-local).
ENV HOME=/tmp \
    SPARK_HOME=/opt/spark \
    SPARK_LOCAL_DIRS=/tmp \
    PYSPARK_PYTHON=/opt/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python
USER 185:185
WORKDIR /tmp
EXPOSE 9108
ENTRYPOINT ["/usr/bin/tini", "-s", "--", "/opt/rebalance-monitor/scripts/image-entrypoint"]
CMD ["--help"]
