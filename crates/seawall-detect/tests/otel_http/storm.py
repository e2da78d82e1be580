#!/usr/bin/env python3
"""A real HTTP retry storm, exported through OpenTelemetry's HTTP semantic-convention metrics.

One process, three parts, all on 127.0.0.1:
- a dependency (plain http.server) that answers 503 while the file TRIGGER exists;
- an edge service (a WSGI app under opentelemetry-instrumentation-wsgi's middleware, so each
  request it serves is recorded in http.server.request.duration) that calls the dependency with
  `requests` (instrumented by opentelemetry-instrumentation-requests, so each attempt is
  recorded in http.client.request.duration) and retries a 5xx up to 3 more times with a short
  exponential backoff, the way application code around `requests` commonly does;
- a load driver (urllib, not instrumented) calling the edge at a steady rate.
OTEL_SEMCONV_STABILITY_OPT_IN=http selects the stable HTTP conventions; the OpenTelemetry
Prometheus exporter serves them on METRICS_PORT as http_server_request_duration_seconds_* and
http_client_request_duration_seconds_*.

usage: storm.py METRICS_PORT TRIGGER SECONDS [old]
With `old`, the instrumentations keep their default (pre-stable) conventions instead.
Prints `ready` once serving; stops by itself after SECONDS (and when its parent closes stdin).
"""

import os
import sys

if len(sys.argv) < 5 or sys.argv[4] != "old":
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "http"

import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import requests
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.instrumentation.requests import RequestsInstrumentor
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import start_http_server

RATE = 20  # edge calls per second
ATTEMPTS = 4  # per edge call, the first included


def main():
    metrics_port, trigger, seconds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    start_http_server(metrics_port, addr="127.0.0.1")
    provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
    RequestsInstrumentor().instrument(meter_provider=provider)

    class Dependency(BaseHTTPRequestHandler):
        def do_GET(self):
            status = 503 if os.path.exists(trigger) else 200
            body = b"unavailable" if status == 503 else b"ok"
            self.send_response(status)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    dep = ThreadingHTTPServer(("127.0.0.1", 0), Dependency)
    threading.Thread(target=dep.serve_forever, daemon=True).start()
    dep_url = f"http://127.0.0.1:{dep.server_address[1]}/orders"
    session = requests.Session()

    def app(environ, start_response):
        status = "503 Service Unavailable"
        for attempt in range(ATTEMPTS):
            if attempt:
                time.sleep(0.005 * 2 ** attempt)
            try:
                r = session.get(dep_url, timeout=1)
            except requests.RequestException:
                continue
            if r.status_code < 500:
                status = "200 OK"
                break
        start_response(status, [("content-type", "text/plain")])
        return [status.encode()]

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    class Threading(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    edge = make_server("127.0.0.1", 0, OpenTelemetryMiddleware(app, meter_provider=provider),
                       server_class=Threading, handler_class=Quiet)
    threading.Thread(target=edge.serve_forever, daemon=True).start()
    edge_url = f"http://127.0.0.1:{edge.server_address[1]}/checkout"

    def call():
        try:
            urllib.request.urlopen(edge_url, timeout=2).read()
        except (urllib.error.URLError, OSError):
            pass

    # Stop when the parent goes away, even if it could not kill us.
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    print("ready", flush=True)
    end = time.monotonic() + seconds
    next_at = time.monotonic()
    while time.monotonic() < end:
        threading.Thread(target=call, daemon=True).start()
        next_at += 1.0 / RATE
        time.sleep(max(0.0, next_at - time.monotonic()))
    os._exit(0)


if __name__ == "__main__":
    main()
