#!/usr/bin/env bash
# Python gRPC with gRPC's OpenTelemetry plugin and the OpenTelemetry Prometheus exporter: the
# gRPC dialect of `detect --prometheus` is tested on the metrics a real gRPC client exports
# (crates/seawall-detect/tests/grpc/storm.py, run by crates/seawall-cli/tests/detect_grpc.rs).
# With requests and OpenTelemetry's WSGI and requests instrumentations, the otel-http dialect is
# tested the same way (crates/seawall-detect/tests/otel_http/storm.py, run by
# crates/seawall-cli/tests/detect_otel_http.rs); with the OTLP/HTTP span exporter, the same storm's
# traces feed `detect --traces` and `--otlp-listen` (crates/seawall-cli/tests/detect_traces.rs). botocore: the SDK retrier of
# crates/seawall-cli/tests/lab_target_botocore.rs.
set -euo pipefail
py="$(command -v python3)"
if "$py" -c 'import grpc, grpc_observability, opentelemetry.sdk.metrics, opentelemetry.exporter.prometheus, requests, opentelemetry.instrumentation.requests, opentelemetry.instrumentation.wsgi, opentelemetry.exporter.otlp.proto.http.trace_exporter, botocore' 2>/dev/null; then
  exit 0
fi
pkgs=(grpcio==1.85.0 grpcio-observability==1.85.0 opentelemetry-sdk==1.45.2 opentelemetry-exporter-prometheus==0.66b2
  requests==2.34.2 opentelemetry-instrumentation-requests==0.66b2 opentelemetry-instrumentation-wsgi==0.66b2 opentelemetry-exporter-otlp-proto-http==1.45.2
  botocore==1.43.11)
# A Debian python3 is "externally managed"; a pyenv or venv one is not.
"$py" -m pip install -q "${pkgs[@]}" || "$py" -m pip install -q --break-system-packages "${pkgs[@]}"
