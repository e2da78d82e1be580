#!/usr/bin/env python3
"""Makes seawall detect's labelled corpus: real gRPC runs, scraped by a real Prometheus, and
every answer `seawall detect --prometheus` got from it, recorded so that the run can be replayed
without either (crates/seawall-cli/tests/detect_corpus.rs serves the answers back).

Each scenario is one process: a grpcio server on 127.0.0.1 that answers UNAVAILABLE during the
scenario's fault windows, and a grpcio client calling it on the scenario's schedule with a retry
policy in its service config (gRFC A6, as revised: maxAttempts 4, exponential backoff; the
"throttled" runs add retryThrottling, maxTokens 10, tokenRatio 0.1). grpcio-observability's
OpenTelemetry plugin exports grpc.client.attempt.started and grpc.client.call.duration (added
back to its default set, as `seawall detect --help` explains) through the OpenTelemetry
Prometheus exporter; Debian's prometheus scrapes it every second. When the schedule is over,
`seawall detect --prometheus PROXY --metrics grpc --from T0 --to T1 --json` runs with default
settings through a recording proxy, and the file gets the proxy's answers, the schedule and the
labels the schedule implies (what each interval should be called, or nothing where a verdict may
honestly go either way: the seconds a rate window takes to see a change).

usage: make.py SEAWALL_BIN OUT_DIR [SCENARIO ...]     (default: every scenario, 3 at a time)
       make.py --list
"""

import datetime
from concurrent import futures
import http.server
import importlib.metadata
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

SCRAPE_S = 1
# `--rate-window auto` is 4 scrape intervals; a change shows fully after that window and two
# scrapes more: verdicts inside that allowance are not labelled.
ALLOW_S = 2 * SCRAPE_S + 4 * SCRAPE_S
# After a change back, the rate window again, and two `recovering` intervals.
BACK_S = ALLOW_S + 3
# Learning: the first rate exists after two scrapes, the window fills 3 s later, then 5 s of
# warm-up; labels start a little after.
LABEL_FROM_S = 14
RELEARN_S = 60

# name: seconds, base calls/s, throttled, faults [(from, to)], rate steps [(from, to, calls/s)],
# client stop (seconds, or None).
SCENARIOS = {
    "grpc-naive": dict(seconds=70, rate=50, throttle=False, faults=[(25, 40)], steps=[], stop=None),
    "grpc-throttled": dict(seconds=70, rate=50, throttle=True, faults=[(25, 40)], steps=[], stop=None),
    "grpc-spike": dict(seconds=70, rate=50, throttle=False, faults=[], steps=[(25, 45, 150)], stop=None),
    "grpc-level-shift": dict(seconds=150, rate=50, throttle=False, faults=[], steps=[(25, 150, 100)], stop=None),
    "grpc-client-stop-1": dict(seconds=60, rate=50, throttle=False, faults=[], steps=[], stop=30),
    "grpc-client-stop-2": dict(seconds=60, rate=50, throttle=False, faults=[], steps=[], stop=30),
    "grpc-outage-4m": dict(seconds=300, rate=50, throttle=False, faults=[(25, 265)], steps=[], stop=None),
}


def labels(sc):
    """[(from_s, to_s, [acceptable verdicts], why)] from the schedule; gaps are unlabelled."""
    end = sc["seconds"]
    # Every second starts as healthy, then the schedule's events overwrite it.
    per = {t: (["healthy"], "steady traffic, no fault") for t in range(LABEL_FROM_S, end)}

    def mark(a, b, kinds, why):
        for t in range(max(a, LABEL_FROM_S), min(b, end)):
            per[t] = (kinds, why) if kinds else None

    for f0, f1 in sc["faults"]:
        during = ["degraded"] if sc["throttle"] else ["retry_storm"]
        why = "fault: every attempt UNAVAILABLE; " + (
            "retries throttled (gRFC A6 retryThrottling)" if sc["throttle"] else "4 attempts a call")
        mark(f0, f0 + ALLOW_S, None, "")
        mark(f0 + ALLOW_S, f1, during, why)
        mark(f1, f1 + BACK_S, None, "")
    for s0, s1, r in sc["steps"]:
        if s1 - s0 > RELEARN_S:
            # A level shift: a spike until the classifier relearns it, then healthy at the new level.
            mark(s0, s0 + ALLOW_S, None, "")
            mark(s0 + ALLOW_S, s0 + RELEARN_S - 2, ["traffic_spike"], f"edge {sc['rate']} -> {r} calls/s, all served")
            mark(s0 + RELEARN_S - 2, s0 + RELEARN_S + ALLOW_S, None, "")
            mark(s0 + RELEARN_S + ALLOW_S, s1, ["healthy"], f"the new level ({r} calls/s) held for a minute")
        else:
            mark(s0, s0 + ALLOW_S, None, "")
            mark(s0 + ALLOW_S, s1, ["traffic_spike"], f"edge {sc['rate']} -> {r} calls/s, all served")
            mark(s1, s1 + BACK_S, None, "")
    if sc["stop"] is not None:
        mark(sc["stop"], sc["stop"] + ALLOW_S, None, "")
        mark(sc["stop"] + ALLOW_S, end, ["quiet", "healthy"], "the client stopped calling")
    out = []
    for t in sorted(per):
        v = per[t]
        if v is None:
            continue
        if out and out[-1][2] == v[0] and out[-1][3] == v[1] and out[-1][1] == t:
            out[-1][1] = t + 1
        else:
            out.append([t, t + 1, v[0], v[1]])
    return [dict(from_s=a, to_s=b, expect=k, why=w) for a, b, k, w in out]


def grpc_process(name, metrics_port, t0):
    """The run itself: server and client in one process, on the scenario's wall-clock schedule."""
    import grpc
    import grpc_observability
    from grpc_observability import _open_telemetry_measures as measures
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client import start_http_server

    sc = SCENARIOS[name]
    policy = {
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
    }
    if sc["throttle"]:
        policy["retryThrottling"] = {"maxTokens": 10, "tokenRatio": 0.1}
    defaults = measures.base_metrics()
    if measures.CLIENT_RPC_DURATION not in defaults:
        measures.base_metrics = lambda: defaults + [measures.CLIENT_RPC_DURATION]
    start_http_server(metrics_port, addr="127.0.0.1")
    provider = MeterProvider(metric_readers=[PrometheusMetricReader()])
    plugin = grpc_observability.OpenTelemetryPlugin(meter_provider=provider)
    plugin.register_global()

    def failing(now):
        return any(a <= now - t0 < b for a, b in sc["faults"])

    def get(request, context):
        if failing(time.time()):
            context.abort(grpc.StatusCode.UNAVAILABLE, "injected fault")
        return request

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    handler = grpc.method_handlers_generic_handler(
        "seawall.test.Orders", {"Get": grpc.unary_unary_rpc_method_handler(get)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.service_config", json.dumps(policy))])
    call = channel.unary_unary("/seawall.test.Orders/Get")
    threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    print("ready", flush=True)
    time.sleep(max(0.0, t0 - time.time()))
    pending = []
    next_at = time.time()
    while time.time() < t0 + sc["seconds"]:
        t = time.time() - t0
        if sc["stop"] is not None and t >= sc["stop"]:
            time.sleep(0.05)
            continue
        rate = next((r for a, b, r in sc["steps"] if a <= t < b), sc["rate"])
        pending.append(call.future(b"x", timeout=2.0))
        pending = [f for f in pending if not f.done()]
        next_at += 1.0 / rate
        time.sleep(max(0.0, next_at - time.time()))
    # Keep exporting while the last rate windows are scraped.
    time.sleep(8)
    plugin.deregister_global()
    server.stop(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rfc3339(unix):
    return datetime.datetime.fromtimestamp(unix, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Recorder(http.server.ThreadingHTTPServer):
    """Forwards GETs to Prometheus and keeps every answer, keyed by path and `query`."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.answers = {}
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), RecordingHandler)


class RecordingHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(url.query).get("query", [""])[0]
        try:
            with urllib.request.urlopen(self.server.upstream + self.path, timeout=30) as r:
                status, body = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read()
        with self.server.lock:
            self.server.answers[url.path + "\n" + q] = dict(status=status, body=body.decode())
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def version(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0].strip()
    except (OSError, IndexError):
        return "unknown"


def make(seawall, out_dir, name):
    sc = SCENARIOS[name]
    tmp = tempfile.mkdtemp(prefix=f"seawall-corpus-{name}-")
    metrics_port = free_port()
    t0 = int(time.time()) + 6
    grpc_proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "_grpc", name, str(metrics_port), str(t0)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert grpc_proc.stdout.readline().strip() == "ready", f"{name}: grpc process did not start"
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write(f"global:\n  scrape_interval: {SCRAPE_S}s\n  scrape_timeout: 900ms\n"
                f"scrape_configs:\n- job_name: grpc\n  static_configs:\n"
                f"  - targets: ['127.0.0.1:{metrics_port}']\n")
    prom_port = free_port()
    prom = subprocess.Popen(
        ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp}/data",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = t0 + sc["seconds"]
        print(f"{name}: recording {sc['seconds']} s from {rfc3339(t0)}", file=sys.stderr, flush=True)
        time.sleep(max(0.0, end + 6 - time.time()))
        rec = Recorder(f"http://127.0.0.1:{prom_port}")
        threading.Thread(target=rec.serve_forever, daemon=True).start()
        args = ["--metrics", "grpc", "--from", rfc3339(t0), "--to", rfc3339(end), "--json"]
        run = subprocess.run([seawall, "detect", "--prometheus", f"http://127.0.0.1:{rec.server_port}"] + args,
                             capture_output=True, text=True)
        rec.shutdown()
        if run.returncode != 0:
            raise SystemExit(f"{name}: detect failed ({run.returncode}): {run.stderr}")
        doc = dict(
            name=name,
            made_by="crates/seawall-detect/tests/corpus/make.py",
            versions=dict(
                python=sys.version.split()[0],
                grpcio=importlib.metadata.version("grpcio"),
                grpcio_observability=importlib.metadata.version("grpcio-observability"),
                opentelemetry_sdk=importlib.metadata.version("opentelemetry-sdk"),
                prometheus=version(["prometheus", "--version"]),
            ),
            scenario=sc,
            scrape_interval_s=SCRAPE_S,
            detect_args=args,
            labels=labels(sc),
            answers=rec.answers,
        )
        with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"{name}: {len(rec.answers)} answers recorded", file=sys.stderr, flush=True)
    finally:
        prom.terminate()
        grpc_proc.stdin.close()
        grpc_proc.terminate()
        prom.wait()
        grpc_proc.wait()


def main():
    if sys.argv[1:2] == ["_grpc"]:
        grpc_process(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
        return
    if sys.argv[1:2] == ["--list"]:
        print("\n".join(SCENARIOS))
        return
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    seawall, out_dir = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or list(SCENARIOS)
    for n in names:
        if n not in SCENARIOS:
            raise SystemExit(f"no scenario {n!r}; scenarios: {', '.join(SCENARIOS)}")
    os.makedirs(out_dir, exist_ok=True)
    # Three at a time: each run is one light process and one Prometheus.
    threads = []
    for n in names:
        while sum(t.is_alive() for t in threads) >= 3:
            time.sleep(0.5)
        t = threading.Thread(target=make, args=(seawall, out_dir, n))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
