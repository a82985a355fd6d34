#!/bin/bash
# Entrypoint of the locally built Kafka image, honouring the contract of the official
# apache/kafka image (docs/reference/containers.md): every KAFKA_<NAME> variable that is
# not a JVM/launcher variable becomes the server property <name> (lower case, "_" -> ".",
# "__" -> "_", "___" -> "-"); with none given, the image's single-node defaults apply.
# CLUSTER_ID formats the storage (KRaft). The broker's log goes to stdout and, when
# BROKERPERF_LOG_FILE is set, to that file as well.
#   BROKERPERF_RENDER_ONLY=1  print the server properties and exit (used by tests)
set -euo pipefail

KAFKA_HOME=${KAFKA_HOME_DIR:-/opt/kafka}
CONF_DIR=${BROKERPERF_CONF_DIR:-/opt/kafka/config}
DEFAULT_CLUSTER_ID=5L6g3nShT-eMCtK--X86sw

# The launcher's own variables (kafka-run-class.sh) and the image's settings: never properties.
is_launcher_var() {
  case "$1" in
    KAFKA_VERSION|KAFKA_HEAP_OPTS|KAFKA_LOG4J_OPTS|KAFKA_OPTS|KAFKA_JMX_OPTS|\
    KAFKA_JVM_PERFORMANCE_OPTS|KAFKA_GC_LOG_OPTS|KAFKA_LOG4J_ROOT_LOGLEVEL|\
    KAFKA_LOG4J_LOGGERS|KAFKA_TOOLS_LOG4J_LOGLEVEL|KAFKA_JMX_HOSTNAME|KAFKA_HOME_DIR|\
    KAFKA_DEBUG) return 0 ;;
  esac
  return 1
}

property_name() {
  local key=${1#KAFKA_}
  key=$(printf '%s' "$key" | tr '[:upper:]' '[:lower:]')
  key=${key//___/-}
  key=${key//__/@}
  key=${key//_/.}
  printf '%s' "${key//@/_}"
}

render() {
  local found=0 name value
  while IFS='=' read -r -d '' name value; do
    [[ $name == KAFKA_* ]] || continue
    is_launcher_var "$name" && continue
    found=1
    printf '%s=%s\n' "$(property_name "$name")" "$value"
  done < <(env -0 | sort -z)
  if [ "$found" = 0 ]; then
    # the official image's defaults: one combined broker+controller on 9092/9093
    cat <<PROPS
node.id=1
process.roles=broker,controller
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
advertised.listeners=PLAINTEXT://localhost:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
controller.quorum.voters=1@localhost:9093
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
PROPS
  fi
  if [ "$found" = 0 ] || [ -z "${KAFKA_LOG_DIRS:-}" ]; then
    echo "log.dirs=/var/lib/kafka/data"
  fi
}

if [ "${BROKERPERF_RENDER_ONLY:-0}" = 1 ]; then
  render
  exit 0
fi

mkdir -p "$CONF_DIR"
render > "$CONF_DIR/server.properties"
CP="$KAFKA_HOME/libs/*"
LOG_OPTS=${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$KAFKA_HOME/config/log4j2.properties}
# shellcheck disable=SC2086  # the *_OPTS variables are word lists, as in kafka-run-class.sh
java -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC $LOG_OPTS -cp "$CP" \
  kafka.tools.StorageTool format --ignore-formatted -t "${CLUSTER_ID:-$DEFAULT_CLUSTER_ID}" \
  -c "$CONF_DIR/server.properties"
if [ -n "${BROKERPERF_LOG_FILE:-}" ]; then
  mkdir -p "$(dirname "$BROKERPERF_LOG_FILE")"
  exec > >(tee -a "$BROKERPERF_LOG_FILE") 2>&1
fi
# shellcheck disable=SC2086
exec java ${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G} \
  ${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true} \
  ${KAFKA_GC_LOG_OPTS:-} $LOG_OPTS ${KAFKA_OPTS:-} -cp "$CP" kafka.Kafka "$CONF_DIR/server.properties"
