#!/usr/bin/env python3
"""A real HTTP retry storm, seen in OpenTelemetry traces.

One process, all on 127.0.0.1, traced by the OpenTelemetry Python SDK and exported over
OTLP/HTTP (protobuf) to ENDPOINT (e.g. `seawall detect --otlp-listen`):
- a dependency: a WSGI app under opentelemetry-instrumentation-wsgi (a server span per
  request, its parent taken from the caller's traceparent); from FAULT_AT for FAULT_S seconds
  it hangs 1.5 s before answering 503 (a dependency that stopped answering in time);
- an edge: a WSGI app under the same middleware that calls the dependency with `requests`
  (opentelemetry-instrumentation-requests: a client span per attempt) with a 300 ms timeout;
  MODE `naive` retries a timeout or a 5xx up to 3 more times at once (the staircase), `none`
  sends one attempt;
- a load driver (urllib, not instrumented): RATE edge calls a second, RATE2 from SPIKE_AT on.

usage: storm.py ENDPOINT SECONDS FAULT_AT FAULT_S MODE [RATE RATE2 SPIKE_AT]
FAULT_S 0: no fault. Prints `ready UNIX_SECONDS` once serving (the load starts then); stops by
itself after SECONDS, flushing its spans (and when its parent closes stdin).
"""

import os
import sys
import threading
import time
import urllib.error
import urllib.request
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import requests
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.requests import RequestsInstrumentor
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor


def main():
    endpoint, seconds = sys.argv[1], float(sys.argv[2])
    fault_at, fault_s, mode = float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    rate = float(sys.argv[6]) if len(sys.argv) > 6 else 20.0
    rate2 = float(sys.argv[7]) if len(sys.argv) > 7 else rate
    spike_at = float(sys.argv[8]) if len(sys.argv) > 8 else seconds
    attempts = 4 if mode == "naive" else 1

    provider = TracerProvider(resource=Resource.create({"service.name": "storm"}))
    # Export every 500 ms (the SDK's default is 5 s), a large queue so no span is dropped.
    provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=endpoint), schedule_delay_millis=500, max_queue_size=65536,
        max_export_batch_size=2048))
    trace.set_tracer_provider(provider)
    RequestsInstrumentor().instrument(tracer_provider=provider)
    start = time.time()

    def dependency(environ, start_response):
        t = time.time() - start
        if fault_s > 0 and fault_at <= t < fault_at + fault_s:
            time.sleep(1.5)
            start_response("503 Service Unavailable", [("content-type", "text/plain")])
            return [b"unavailable"]
        time.sleep(0.01)
        start_response("200 OK", [("content-type", "text/plain")])
        return [b"ok"]

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    class Threading(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    def serve(app):
        srv = make_server("127.0.0.1", 0, OpenTelemetryMiddleware(app, tracer_provider=provider),
                          server_class=Threading, handler_class=Quiet)
        srv.request_queue_size = 512
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        return srv.server_address[1]

    dep_url = f"http://127.0.0.1:{serve(dependency)}/orders"
    session = requests.Session()
    session.mount("http://", requests.adapters.HTTPAdapter(pool_maxsize=256))

    def edge(environ, start_response):
        status = "503 Service Unavailable"
        for _ in range(attempts):
            try:
                r = session.get(dep_url, timeout=0.3)
            except requests.RequestException:
                continue
            if r.status_code < 500:
                status = "200 OK"
                break
        start_response(status, [("content-type", "text/plain")])
        return [status.encode()]

    edge_url = f"http://127.0.0.1:{serve(edge)}/checkout"

    def call():
        try:
            urllib.request.urlopen(edge_url, timeout=5).read()
        except (urllib.error.URLError, OSError):
            pass

    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    start = time.time()
    print(f"ready {start:.3f}", flush=True)
    end = time.monotonic() + seconds
    next_at = time.monotonic()
    while time.monotonic() < end:
        threading.Thread(target=call, daemon=True).start()
        t = time.time() - start
        next_at += 1.0 / (rate2 if t >= spike_at else rate)
        time.sleep(max(0.0, next_at - time.monotonic()))
    time.sleep(2.0)  # the last calls end
    provider.shutdown()  # flushes the batch processor
    os._exit(0)


if __name__ == "__main__":
    main()
