#!/usr/bin/env bash
# A Docker engine and the locally built broker images, for --brokerperf-provision=container.
# Idempotent: installs docker.io and debootstrap when missing, starts dockerd when no
# engine answers, and builds each image only when its content hash (Dockerfile,
# entrypoint, logging config, jar list, base image) changed, so a second run takes
# seconds. Nothing is pulled from an image registry: the base image is a Debian root
# filesystem made with debootstrap and imported with `docker import`, and the broker
# jars come from the pytest-brokerperf cache (ci/setup.sh fills it).
#   BROKERPERF_IMAGES="kafka rabbitmq pulsar"  which broker images to build (default: all,
#   the stand-ins redpanda-standin, s3-standin and automq-standin included)
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
CACHE=${BROKERPERF_CACHE:-$HOME/.cache/pytest-brokerperf}/images
BASE=brokerperf/debian:bookworm
export DOCKER_BUILDKIT=0  # the classic builder: no buildx plugin or registry needed
mkdir -p "$CACHE"
log() { echo "ci/docker.sh: $*"; }

# -- the engine -------------------------------------------------------------------------
need_apt=()
command -v dockerd >/dev/null 2>&1 || need_apt+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing ${need_apt[*]} with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    log "please install: ${need_apt[*]}" >&2
    exit 2
  fi
fi
if ! docker info >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    log "no Docker engine answers and starting dockerd needs root" >&2
    exit 2
  fi
  log "starting dockerd (log: /var/log/brokerperf-dockerd.log)"
  nohup dockerd >/var/log/brokerperf-dockerd.log 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 0.5
  done
  docker info >/dev/null 2>&1 || { log "dockerd did not answer within 30 s:"; tail -20 /var/log/brokerperf-dockerd.log; exit 2; } >&2
fi

# -- the base image: Debian bookworm minbase, imported --------------------------------
if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  tarball="$CACHE/debian-bookworm-minbase.tar"
  if [ ! -s "$tarball" ]; then
    mirror=$(awk '/^URIs:/ {print $2; exit} /^deb / {print $2; exit}' \
             /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true)
    mirror=${mirror:-${DEBIAN_MIRROR:?set DEBIAN_MIRROR to a Debian mirror URL}}
    rootfs=$(mktemp -d /tmp/brokerperf-rootfs.XXXXXX)
    log "debootstrap --variant=minbase bookworm from $mirror"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$CACHE/debootstrap.log" 2>&1 \
      || { tail -20 "$CACHE/debootstrap.log" >&2; exit 2; }
    # the image's apt uses the same mirror
    echo "deb $mirror bookworm main" >"$rootfs/etc/apt/sources.list"
    tar -C "$rootfs" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
  fi
  log "docker import $tarball as $BASE"
  docker import "$tarball" "$BASE" >/dev/null
fi
base_id=$(docker image inspect --format '{{.Id}}' "$BASE")

# -- broker images ----------------------------------------------------------------------
build_kafka() {
  local lib version ctx hash tag current
  lib=$("$PY" -m pytest_brokerperf.brokers.provision.maven kafka)
  version=$("$PY" -c 'from pytest_brokerperf.brokers.versions import KAFKA_DEFAULT_VERSION as v; print(v)')
  tag="brokerperf/kafka:$version"
  hash=$( { cat ci/images/kafka/Dockerfile ci/images/kafka/entrypoint.sh; \
            "$PY" -c 'from pytest_brokerperf.brokers.kafka.process import render_log4j2_properties as r; print(r())'; \
            (cd "$lib" && ls -l --time-style=+ . | awk '{print $5, $NF}'); echo "$base_id"; } \
          | sha256sum | cut -c1-16)
  current=$(docker image inspect --format '{{index .Config.Labels "org.brokerperf.content-hash"}}' \
            "$tag" 2>/dev/null || true)
  if [ "$current" = "$hash" ]; then
    log "$tag is up to date (content hash $hash)"
    return
  fi
  ctx=$(mktemp -d /tmp/brokerperf-kafka-image.XXXXXX)
  cp ci/images/kafka/Dockerfile ci/images/kafka/entrypoint.sh "$ctx/"
  cp -r "$lib" "$ctx/libs"
  "$PY" -c 'from pytest_brokerperf.brokers.kafka.process import render_log4j2_properties as r; print(r(), end="")' \
    >"$ctx/log4j2.properties"
  log "building $tag (content hash $hash)"
  docker build --network host -q --build-arg "BASE=$BASE" --build-arg "KAFKA_VERSION=$version" \
    --build-arg "CONTENT_HASH=$hash" -t "$tag" "$ctx" >/dev/null
  rm -rf "$ctx"
  log "built $tag"
}

build_rabbitmq() {
  local ctx hash tag current
  hash=$( { cat ci/images/rabbitmq/Dockerfile ci/images/rabbitmq/entrypoint.sh; echo "$base_id"; } \
          | sha256sum | cut -c1-16)
  tag="brokerperf/rabbitmq:3.10"
  current=$(docker image inspect --format '{{index .Config.Labels "org.brokerperf.content-hash"}}' \
            "$tag" 2>/dev/null || true)
  if [ "$current" = "$hash" ]; then
    log "$tag is up to date (content hash $hash)"
    return
  fi
  ctx=$(mktemp -d /tmp/brokerperf-rabbitmq-image.XXXXXX)
  cp ci/images/rabbitmq/Dockerfile ci/images/rabbitmq/entrypoint.sh "$ctx/"
  log "building $tag (content hash $hash)"
  docker build --network host -q --build-arg "BASE=$BASE" --build-arg "CONTENT_HASH=$hash" -t "$tag" "$ctx" >/dev/null
  rm -rf "$ctx"
  log "built $tag (rabbitmq-server $(docker run --rm --entrypoint dpkg-query "$tag" -W -f '${Version}' rabbitmq-server))"
}

build_pulsar() {
  local lib version ctx hash tag current
  lib=$("$PY" -m pytest_brokerperf.brokers.provision.maven pulsar)
  version=$("$PY" -c 'from pytest_brokerperf.brokers.provision.maven import PULSAR_DEFAULT_VERSION as v; print(v)')
  tag="brokerperf/pulsar:$version"
  ctx=$(mktemp -d /tmp/brokerperf-pulsar-image.XXXXXX)
  cp ci/images/pulsar/Dockerfile ci/images/pulsar/pulsar ci/images/pulsar/apply-config-from-env.py \
    ci/images/pulsar/apply-config-from-env-with-prefix.py "$ctx/"
  "$PY" -c 'from pytest_brokerperf.brokers.pulsar.process import render_pulsar_log4j2 as r; print(r(), end="")' \
    >"$ctx/log4j2.properties"
  "$PY" -c 'from pytest_brokerperf.brokers.pulsar.container import image_default_config as c; print(c(), end="")' \
    >"$ctx/standalone.conf"
  # zookeeper.conf, bookkeeper.conf, broker.conf of the three-container layout
  "$PY" -c 'import sys; from pathlib import Path; from pytest_brokerperf.brokers.pulsar.container_layout import image_default_files as f; [Path(sys.argv[1], n).write_text(t) for n, t in f().items()]' "$ctx"
  hash=$( { cat "$ctx"/*; (cd "$lib" && ls -l --time-style=+ . | awk '{print $5, $NF}'); \
            echo "$base_id"; } | sha256sum | cut -c1-16)
  current=$(docker image inspect --format '{{index .Config.Labels "org.brokerperf.content-hash"}}' \
            "$tag" 2>/dev/null || true)
  if [ "$current" = "$hash" ]; then
    log "$tag is up to date (content hash $hash)"
    rm -rf "$ctx"
    return
  fi
  cp -r "$lib" "$ctx/libs"
  log "building $tag (content hash $hash)"
  docker build --network host -q --build-arg "BASE=$BASE" --build-arg "PULSAR_VERSION=$version" \
    --build-arg "CONTENT_HASH=$hash" -t "$tag" "$ctx" >/dev/null
  rm -rf "$ctx"
  log "built $tag"
}

# A test stand-in for Redpanda (no Redpanda image or binary can be obtained here): Kafka
# behind `redpanda start`, built on the Kafka image.
# build_from_files TAG BUILD_ARG HASH_INPUT FILE...: TAG built from FILEs (copied into a
# fresh context) with --build-arg BUILD_ARG, unless the image already carries the content
# hash of those files and HASH_INPUT (the image it is built on).
build_from_files() {
  local tag=$1 arg=$2 extra=$3 hash current ctx
  shift 3
  hash=$( { cat "$@"; echo "$extra"; } | sha256sum | cut -c1-16)
  current=$(docker image inspect --format '{{index .Config.Labels "org.brokerperf.content-hash"}}' \
            "$tag" 2>/dev/null || true)
  if [ "$current" = "$hash" ]; then
    log "$tag is up to date (content hash $hash)"
    return
  fi
  ctx=$(mktemp -d /tmp/brokerperf-image.XXXXXX)
  cp "$@" "$ctx/"
  docker build --network host -q --build-arg "$arg" \
    --build-arg "CONTENT_HASH=$hash" -t "$tag" "$ctx" >/dev/null
  rm -rf "$ctx"
  log "built $tag"
}

# The local Kafka image's tag, built first when missing (the stand-ins start from it).
kafka_image() {
  local kafka_tag
  kafka_tag="brokerperf/kafka:$("$PY" -c 'from pytest_brokerperf.brokers.versions import KAFKA_DEFAULT_VERSION as v; print(v)')"
  docker image inspect "$kafka_tag" >/dev/null 2>&1 || build_kafka >&2
  echo "$kafka_tag"
}

build_redpanda_standin() {
  local kafka_tag
  kafka_tag=$(kafka_image)
  build_from_files brokerperf/redpanda-standin:latest "KAFKA_IMAGE=$kafka_tag" \
    "$(docker image inspect --format '{{.Id}}' "$kafka_tag")" \
    ci/images/redpanda-standin/Dockerfile ci/images/redpanda-standin/redpanda
}

# Test stand-ins for AutoMQ's deployment (no AutoMQ or MinIO image can be obtained here):
# an S3 subset behind `minio server /data` on the Debian base, and Kafka behind AutoMQ's
# `kafka-server-start.sh --override ...` that checks its buckets first.
build_s3_standin() {
  build_from_files brokerperf/s3-standin:latest "BASE=$BASE" "$base_id" \
    ci/images/s3-standin/Dockerfile ci/images/s3-standin/minio
}

build_automq_standin() {
  local kafka_tag
  kafka_tag=$(kafka_image)
  build_from_files brokerperf/automq-standin:latest "KAFKA_IMAGE=$kafka_tag" \
    "$(docker image inspect --format '{{.Id}}' "$kafka_tag")" \
    ci/images/automq-standin/Dockerfile ci/images/automq-standin/kafka-server-start.sh \
    ci/images/automq-standin/server.properties
}

KNOWN_IMAGES="kafka rabbitmq pulsar redpanda-standin s3-standin automq-standin"
for image in ${BROKERPERF_IMAGES:-$KNOWN_IMAGES}; do
  case "$image" in
    kafka) build_kafka ;;
    rabbitmq) build_rabbitmq ;;
    pulsar) build_pulsar ;;
    redpanda-standin) build_redpanda_standin ;;
    s3-standin) build_s3_standin ;;
    automq-standin) build_automq_standin ;;
    *) log "no local image recipe for $image (known: ${KNOWN_IMAGES// /, })" >&2; exit 2 ;;
  esac
done
