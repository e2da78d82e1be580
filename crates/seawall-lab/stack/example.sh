#!/bin/sh
# Starts the example stack of README.md (this folder) on loopback, for one --config of
# `seawall lab --target`: the bounded dependency, three backends (`seawall node`), nginx, then
# HAProxy, exec'd in the foreground. Every process stays in the shell's process group, which
# the lab stops after the run.
#
#   example.sh before|after SCRATCH_DIR
#
# before: HAProxy `retries 2` + `retry-on 503`, nginx `proxy_next_upstream error timeout
#         http_503` with 3 tries, each backend a naive client of 2 attempts: 3 × 3 × 2 = 18.
# after:  HAProxy's and nginx's retries off; each backend calls through seawall's RetryLayer
#         (the one owner of retries), the 100 ms as its deadline.
#
# Ports (environment, defaults in brackets): EDGE_PORT [8080] (HAProxy: the lab's --target),
# NGINX_PORT [8081], BACKEND_PORTS ["8091 8092 8093"], PROXY_PORT [7080] (where the backends
# call: the lab's --proxy LISTEN), DEP_PORT [7090] (the dependency: the --proxy UPSTREAM).
# Programs: SEAWALL [seawall], HAPROXY [haproxy], NGINX [nginx]. The dependency: 2 workers,
# 20 ms each (100 requests/s), a queue of 100; the backends give up after 100 ms.
set -eu
usage() { echo "usage: $0 before|after SCRATCH_DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
mode=$1 dir=$2
case $mode in
    before) retries=2 retry_on=503 next='error timeout http_503' tries=3 client='naive' ;;
    after) retries=0 retry_on=none next=off tries=1 client='seawall' ;;
    *) usage ;;
esac
: "${EDGE_PORT:=8080}" "${NGINX_PORT:=8081}" "${BACKEND_PORTS:=8091 8092 8093}"
: "${PROXY_PORT:=7080}" "${DEP_PORT:=7090}"
: "${SEAWALL:=seawall}" "${HAPROXY:=haproxy}" "${NGINX:=nginx}"
here=$(dirname "$0")
mkdir -p "$dir"

"$SEAWALL" node dependency --listen "127.0.0.1:$DEP_PORT" --workers 2 --service-ms 20 \
    --queue 100 &
seed=1
servers=
for p in $BACKEND_PORTS; do
    "$SEAWALL" node backend --listen "127.0.0.1:$p" --upstream "http://127.0.0.1:$PROXY_PORT/dep" \
        --client "$client" --attempts 2 --timeout-ms 100 --seed "$seed" &
    seed=$((seed + 1))
    servers="$servers server 127.0.0.1:$p max_fails=0;"
done

sed -e "s|{{PREFIX}}|$dir|g" -e "s|{{NGINX_PORT}}|$NGINX_PORT|g" \
    -e "s|{{NGINX_SERVERS}}|$servers|" -e "s|{{NGINX_NEXT_UPSTREAM}}|$next|" \
    -e "s|{{NGINX_TRIES}}|$tries|" "$here/nginx.conf.tmpl" >"$dir/nginx.conf"
sed -e "s|{{EDGE_PORT}}|$EDGE_PORT|g" -e "s|{{NGINX_PORT}}|$NGINX_PORT|g" \
    -e "s|{{HAPROXY_RETRIES}}|$retries|" -e "s|{{HAPROXY_RETRY_ON}}|$retry_on|" \
    "$here/haproxy.cfg.tmpl" >"$dir/haproxy.cfg"
if grep -q '{{' "$dir/nginx.conf" "$dir/haproxy.cfg"; then
    echo "$0: a placeholder is left unfilled in $dir" >&2
    exit 1
fi
"$NGINX" -p "$dir/" -c "$dir/nginx.conf" &
# nginx must be up behind HAProxy, which is the target the lab waits for.
sleep 0.3
exec "$HAPROXY" -db -f "$dir/haproxy.cfg"
