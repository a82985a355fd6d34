#!/bin/bash
# `kafka-server-start.sh PROPERTIES [--override KEY=VALUE ...]` of the AutoMQ stand-in
# (see the Dockerfile). The object-storage keys (s3.*) are checked against their store
# and never reach Kafka; every other key becomes a KAFKA_* variable of the Kafka image.
#   BROKERPERF_RENDER_ONLY=1  print the Kafka properties and the bucket checks, then exit
set -euo pipefail
say() { echo "automq-standin: $*"; }
die() { echo "automq-standin: ERROR $*" >&2; exit 1; }

[ $# -ge 1 ] || die "usage: kafka-server-start.sh PROPERTIES [--override KEY=VALUE ...]"
props_file=$1; shift
[ -f "$props_file" ] || die "no properties file $props_file"
declare -A props=()
order=()
set_prop() { [ -n "${props[$1]+x}" ] || order+=("$1"); props[$1]=$2; }
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  set_prop "${line%%=*}" "${line#*=}"
done <"$props_file"
while [ $# -gt 0 ]; do
  case "$1" in
    --override) [ $# -ge 2 ] || die "--override needs KEY=VALUE"
                [[ $2 == *=* ]] || die "--override $2 is not KEY=VALUE"
                set_prop "${2%%=*}" "${2#*=}"; shift 2 ;;
    *) die "unexpected argument $1 (AutoMQ's launcher takes --override KEY=VALUE)" ;;
  esac
done

# -- object storage: AutoMQ needs its buckets and credentials before anything else -------
[ -n "${KAFKA_S3_ACCESS_KEY:-}" ] && [ -n "${KAFKA_S3_SECRET_KEY:-}" ] \
  || die "KAFKA_S3_ACCESS_KEY and KAFKA_S3_SECRET_KEY must be set"
for key in s3.data.buckets s3.ops.buckets s3.wal.path; do
  [ -n "${props[$key]:-}" ] || die "$key is not set (--override $key=ID@s3://BUCKET?...)"
done
# ID@s3://BUCKET?region=R&endpoint=URL&pathStyle=true -> "BUCKET REGION ENDPOINT"
parse_uri() {
  local uri=${1#*@} bucket query region endpoint
  [[ $uri == s3://* ]] || die "$2: $1 is not an s3:// URI"
  uri=${uri#s3://}; bucket=${uri%%\?*}; query=${uri#*\?}
  [ "$query" != "$uri" ] || query=""
  region=$(tr '&' '\n' <<<"$query" | sed -n 's/^region=//p')
  endpoint=$(tr '&' '\n' <<<"$query" | sed -n 's/^endpoint=//p')
  [ -n "$bucket" ] && [ -n "$endpoint" ] || die "$2: $1 names no bucket or no endpoint"
  echo "$bucket ${region:-us-east-1} $endpoint"
}
s3() {  # s3 METHOD REGION URL [BODY]: the HTTP status of a signed request
  local method=$1 region=$2 url=$3
  local args=(-sS -o /tmp/s3-answer -w '%{http_code}' --max-time 5 -X "$method"
              --aws-sigv4 "aws:amz:$region:s3" --user "$KAFKA_S3_ACCESS_KEY:$KAFKA_S3_SECRET_KEY")
  [ $# -ge 4 ] && args+=(-H "Content-Type: application/octet-stream" --data-binary "$4")
  curl "${args[@]}" "$url" 2>/tmp/s3-error || true  # -w prints 000 when nothing answered
}
ops_target=""
for key in s3.data.buckets s3.ops.buckets s3.wal.path; do
  IFS=',' read -ra uris <<<"${props[$key]}"
  for uri in "${uris[@]}"; do
    parsed=$(parse_uri "$uri" "$key")
    read -r bucket region endpoint <<<"$parsed"
    if [ "${BROKERPERF_RENDER_ONLY:-0}" = 1 ]; then
      echo "check $key $bucket $region $endpoint"; continue
    fi
    status=000
    for _ in $(seq 1 20); do  # the store's name may take a moment to resolve
      # ListObjectsV2 of one key: an error answer says why (HEAD would carry no body)
      status=$(s3 GET "$region" "$endpoint/$bucket?list-type=2&max-keys=1")
      [ "$status" = 000 ] || break
      sleep 0.5
    done
    [ "$status" = 200 ] || die "$key: bucket $bucket at $endpoint answered HTTP $status" \
      "($(cat /tmp/s3-error /tmp/s3-answer 2>/dev/null | head -c 300)); AutoMQ needs it to exist" \
      "and KAFKA_S3_ACCESS_KEY/KAFKA_S3_SECRET_KEY to be its credentials"
    say "$key: bucket $bucket at $endpoint is reachable"
    [ "$key" = s3.ops.buckets ] && [ -z "$ops_target" ] && ops_target="$region $endpoint/$bucket"
  done
done
cluster_id=${props[cluster.id]:-${CLUSTER_ID:-}}
[ -n "$cluster_id" ] || die "no cluster.id (--override cluster.id=... or CLUSTER_ID)"

# -- Kafka ------------------------------------------------------------------------------
env_name() {  # the Kafka image's KAFKA_* rule, inverted: "_" -> "__", "-" -> "___", "." -> "_"
  local k=${1//_/__}; k=${k//-/___}; k=${k//./_}
  printf 'KAFKA_%s' "${k^^}"
}
for key in "${order[@]}"; do
  case "$key" in
    s3.*|elasticstream.*|cluster.id|create.topic.policy.class.name) continue ;;
    # Kafka takes a static voter set or bootstrap servers; the stand-in keeps the voters
    controller.quorum.bootstrap.servers) continue ;;
  esac
  if [ "${BROKERPERF_RENDER_ONLY:-0}" = 1 ]; then echo "$key=${props[$key]}"; continue; fi
  export "$(env_name "$key")=${props[$key]}"
done
[ "${BROKERPERF_RENDER_ONLY:-0}" = 1 ] && { echo "cluster.id=$cluster_id"; exit 0; }

read -r region url <<<"$ops_target"
marker="$url/brokerperf-standin/started-node-${props[node.id]:-0}"
status=$(s3 PUT "$region" "$marker" "cluster.id=$cluster_id started=$(date -u +%FT%TZ)")
[ "$status" = 200 ] || die "writing $marker answered HTTP $status ($(head -c 300 /tmp/s3-answer 2>/dev/null))"
say "wrote $marker"
export CLUSTER_ID=$cluster_id
unset KAFKA_S3_ACCESS_KEY KAFKA_S3_SECRET_KEY  # credentials, not Kafka properties
exec /etc/kafka/docker/run
