#!/bin/bash
# Entrypoint of the locally built RabbitMQ image, honouring the contract of the official
# rabbitmq image (docs/reference/containers.md):
#   - RABBITMQ_DEFAULT_USER / RABBITMQ_DEFAULT_PASS / RABBITMQ_DEFAULT_VHOST become
#     default_user / default_pass / default_vhost;
#   - /etc/rabbitmq/conf.d/10-defaults.conf holds the image's defaults (guest may log in
#     from other hosts, AMQP on 5672, management on 15672, log to the console); files
#     mounted into /etc/rabbitmq/conf.d/ come after it and win;
#   - RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS is read by rabbitmq-server itself;
#   - the node is rabbit@<hostname>, its data in /var/lib/rabbitmq, and it runs as the
#     rabbitmq user, so `docker exec NAME rabbitmqctl ...` works as root.
#   BROKERPERF_RENDER_ONLY=1  print the rendered configuration and exit (used by tests)
set -euo pipefail

CONF_DIR=${BROKERPERF_CONF_DIR:-/etc/rabbitmq}

render() {
  cat <<CONF
loopback_users.guest = false
listeners.tcp.default = 5672
management.tcp.port = 15672
log.console = true
log.console.level = info
CONF
  [ -n "${RABBITMQ_DEFAULT_USER:-}" ] && echo "default_user = ${RABBITMQ_DEFAULT_USER}"
  [ -n "${RABBITMQ_DEFAULT_PASS:-}" ] && echo "default_pass = ${RABBITMQ_DEFAULT_PASS}"
  [ -n "${RABBITMQ_DEFAULT_VHOST:-}" ] && echo "default_vhost = ${RABBITMQ_DEFAULT_VHOST}"
  return 0
}

if [ "${BROKERPERF_RENDER_ONLY:-}" = 1 ]; then
  render
  exit 0
fi

mkdir -p "$CONF_DIR/conf.d"
render >"$CONF_DIR/conf.d/10-defaults.conf"
chmod 0640 "$CONF_DIR/conf.d/10-defaults.conf"
chown rabbitmq:rabbitmq "$CONF_DIR/conf.d/10-defaults.conf" 2>/dev/null || true
# An empty env file: the package's /etc/rabbitmq/rabbitmq-env.conf must not redirect logs.
: >"$CONF_DIR/rabbitmq-env.conf"
export RABBITMQ_CONFIG_FILES="$CONF_DIR/conf.d"

if [ "${1:-}" = rabbitmq-server ]; then
  chown -R rabbitmq:rabbitmq /var/lib/rabbitmq /var/log/rabbitmq
  shift
  # in the foreground, log on stdout (the Debian wrapper would send it to a file); setpriv
  # execs, so the node (beam.smp) is the container's main process, as in the official image
  export HOME=/var/lib/rabbitmq
  exec setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups \
    /usr/lib/rabbitmq/bin/rabbitmq-server "$@"
fi
exec "$@"
