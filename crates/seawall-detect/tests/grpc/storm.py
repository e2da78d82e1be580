#!/usr/bin/env python3
"""A real gRPC retry storm, exported through gRPC's own OpenTelemetry metrics (gRFC A66).

One process: a gRPC server on 127.0.0.1 that answers UNAVAILABLE while the file TRIGGER exists,
and a gRPC client calling it at a steady rate with a retry policy in its service config
(gRFC A6: up to 4 attempts on UNAVAILABLE, no retry throttling). grpcio-observability's
OpenTelemetryPlugin records grpc.client.attempt.started and grpc.client.call.duration into an
OpenTelemetry MeterProvider whose PrometheusMetricReader serves them on METRICS_PORT, where a
Prometheus scrapes them as grpc_client_attempt_started_total and
grpc_client_call_duration_seconds_count.

usage: storm.py METRICS_PORT TRIGGER SECONDS [CALLS_PER_SECOND]
Stops by itself after SECONDS (and when its parent closes stdin).
"""

import json
import os
import sys
import threading
import time
from concurrent import futures

import grpc
import grpc_observability
from grpc_observability import _open_telemetry_measures as measures
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import start_http_server

METHOD = "/seawall.test.Orders/Get"
RATE = 50  # calls per second (the default)

SERVICE_CONFIG = json.dumps({
    "methodConfig": [{
        "name": [{"service": "seawall.test.Orders"}],
        "retryPolicy": {
            "maxAttempts": 4,
            "initialBackoff": "0.01s",
            "maxBackoff": "0.05s",
            "backoffMultiplier": 2,
            "retryableStatusCodes": ["UNAVAILABLE"],
        },
    }]
})


def main():
    metrics_port, trigger, seconds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    rate = float(sys.argv[4]) if len(sys.argv) > 4 else RATE
    # grpcio-observability measures each call's duration (grpc.client.call.duration, gRFC A66)
    # but leaves it out of its default metric set ("not required yet" in 1.85): add it back,
    # so the plugin's own recorder exports it beside grpc.client.attempt.started.
    defaults = measures.base_metrics()
    if measures.CLIENT_RPC_DURATION not in defaults:
        measures.base_metrics = lambda: defaults + [measures.CLIENT_RPC_DURATION]
    start_http_server(metrics_port, addr="127.0.0.1")
    provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
    plugin = grpc_observability.OpenTelemetryPlugin(meter_provider=provider)
    plugin.register_global()

    def get(request, context):
        if os.path.exists(trigger):
            context.abort(grpc.StatusCode.UNAVAILABLE, "injected fault")
        return request

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    handler = grpc.method_handlers_generic_handler(
        "seawall.test.Orders", {"Get": grpc.unary_unary_rpc_method_handler(get)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()

    channel = grpc.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.service_config", SERVICE_CONFIG)])
    call = channel.unary_unary(METHOD)
    pending = []
    # Stop when the parent goes away, even if it could not kill us.
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    print("ready", flush=True)
    end = time.monotonic() + seconds
    next_at = time.monotonic()
    while time.monotonic() < end:
        pending.append(call.future(b"x", timeout=2.0))
        pending = [f for f in pending if not f.done()]
        next_at += 1.0 / rate
        time.sleep(max(0.0, next_at - time.monotonic()))
    plugin.deregister_global()
    server.stop(0)


if __name__ == "__main__":
    main()
