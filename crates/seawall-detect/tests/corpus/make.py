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

The lab scenarios are replay files instead: `seawall lab` on its own baseline and seawall
stacks (real tiers on loopback, a fault at the dependency), and `seawall lab --target` on the
HAProxy + nginx stack of crates/seawall-lab/stack/ (before: every layer retrying; after: one
owner). Each configuration's run is kept as the results.json the lab wrote (`replay`), which
`seawall detect --replay` reads; its labels come from the schedule and, after the fault, from
what the run served (the lab's judgement of its own goodput: recovered at N s, or stayed down).

usage: make.py SEAWALL_BIN OUT_DIR [SCENARIO ...]     (default: every scenario, 3 at a time;
                                                       the lab ones one at a time, after)
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

# The replay scenarios: a lab run per configuration, its results.json replayed by detect.
# kind "lab": `seawall lab --config CONFIG`; kind "stack": `seawall lab --target` on the example
# stack, started by crates/seawall-lab/stack/example.sh. `throttle`: retries are bounded there
# (no storm is right); faults as (from, to) seconds of the run.
STACK = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                      "../../../seawall-lab/stack/example.sh"))
LAB_SCENARIOS = {
    "lab-baseline": dict(kind="lab", config="baseline", seconds=60, rate=40, throttle=False,
                         fault="fail", faults=[(25, 35)], steps=[], stop=None),
    "lab-seawall": dict(kind="lab", config="seawall", seconds=60, rate=40, throttle=True,
                        fault="fail", faults=[(25, 35)], steps=[], stop=None),
    "stack-haproxy-nginx-before": dict(kind="stack", config="before", seconds=45, rate=20,
                                       throttle=False, fault="slow,latency=90", faults=[(20, 25)],
                                       steps=[], stop=None),
    "stack-haproxy-nginx-after": dict(kind="stack", config="after", seconds=45, rate=20,
                                      throttle=True, fault="slow,latency=90", faults=[(20, 25)],
                                      steps=[], stop=None),
}
# Replays have no rate window: a change shows in the interval it happens in, and attempts per
# call are judged over three intervals (a jump counts once two of them hold it).
REPLAY_ALLOW_S = 3
REPLAY_LABEL_FROM_S = 10
# detect's grace after the trigger's end before a failure that persists is `metastable`.
GRACE_S = 10


def spans(per):
    """{second: (kinds, why) or None} as labels: runs of equal seconds joined, None left out."""
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


def replay_labels(sc, run):
    """Labels for one lab run: the schedule before and during the fault; after it, what the run
    served (its own verdict: recovered N s after the fault, or stayed down)."""
    end = sc["seconds"]
    per = {t: (["healthy"], "steady traffic, no fault") for t in range(REPLAY_LABEL_FROM_S, end)}

    def mark(a, b, kinds, why):
        for t in range(max(a, REPLAY_LABEL_FROM_S), min(b, end)):
            per[t] = (kinds, why) if kinds else None

    f0, f1 = sc["faults"][0]
    if sc["throttle"]:
        during, why = ["degraded", "healthy", "recovering"], "fault; retries bounded: not a storm"
    else:
        during, why = ["retry_storm"], "fault; every layer retrying"
    mark(f0, f0 + REPLAY_ALLOW_S, None, "")
    mark(f0 + REPLAY_ALLOW_S, f1, during, why)
    v = run["verdict"]
    if v["kind"] == "recovered":
        back = f1 + int(v.get("recovery_s") or 0)
        mark(f1, back + REPLAY_ALLOW_S + 3, None, "")
        mark(back + REPLAY_ALLOW_S + 3, end, ["healthy", "recovering"],
             f"goodput back {v.get('recovery_s')} s after the fault (the run's own verdict)")
    elif v["kind"] == "stays_down":
        mark(f1, f1 + GRACE_S + REPLAY_ALLOW_S, None, "")
        mark(f1 + GRACE_S + REPLAY_ALLOW_S, end, ["metastable"],
             "goodput stayed down after the fault ended (the run's own verdict)")
    else:
        mark(f1, end, None, "")
    return spans(per)


def make_lab(seawall, out_dir, name):
    """Runs one lab scenario and writes its replay file."""
    sc = LAB_SCENARIOS[name]
    tmp = tempfile.mkdtemp(prefix=f"seawall-corpus-{name}-")
    f0, f1 = sc["faults"][0]
    kind, _, extra = sc["fault"].partition(",")
    common = ["--rate", str(sc["rate"]), "--duration", str(sc["seconds"]), "--out", tmp]
    if sc["kind"] == "lab":
        cmd = [seawall, "lab", "--config", sc["config"], "--capacity", "50", "--workers", "2",
               "--fault", f"{kind}:{f1 - f0}", "--at", str(f0)] + common
    else:
        ports = [free_port() for _ in range(7)]
        edge, nginx, proxy, dep = ports[:4]
        env = (f"EDGE_PORT={edge} NGINX_PORT={nginx} BACKEND_PORTS='{ports[4]} {ports[5]} {ports[6]}' "
               f"PROXY_PORT={proxy} DEP_PORT={dep} SEAWALL={seawall}")
        fault = f"dep:{kind}:{f1 - f0}@{f0}" + (f",{extra}" if extra else "")
        cmd = [seawall, "lab", "--target", f"http://127.0.0.1:{edge}/checkout",
               "--proxy", f"dep=127.0.0.1:{proxy},127.0.0.1:{dep}", "--fault", fault,
               "--deadline-ms", "5000",
               "--config", f"{sc['config']}={env} sh {STACK} {sc['config']} {tmp}/{sc['config']}"] + common
    print(f"{name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{name}: the lab failed ({run.returncode}): {run.stderr}")
    with open(os.path.join(tmp, "results.json")) as f:
        results = json.load(f)
    (one,) = [r for r in results["runs"] if r["policy"] == sc["config"]]
    results["runs"] = [one]
    versions = dict(seawall=version([seawall, "--version"]))
    if sc["kind"] == "stack":
        versions.update(haproxy=version(["haproxy", "-v"]), nginx=version_stderr(["nginx", "-v"]))
    doc = dict(
        name=name,
        made_by="crates/seawall-detect/tests/corpus/make.py",
        source="replay",
        versions=versions,
        # The command as run, with the machine's paths replaced: the binary, the scratch folder,
        # the stack script.
        command=[c.replace(seawall, "seawall").replace(tmp, "OUT")
                 .replace(os.path.normpath(STACK), "crates/seawall-lab/stack/example.sh") for c in cmd],
        scenario=sc,
        detect_args=["--policy", sc["config"], "--json"],
        labels=replay_labels(sc, one),
        replay=results,
    )
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{name}: {one['verdict']['kind']}; goodput before/during/after "
          f"{one['goodput_before']:.2f}/{one['goodput_during']:.2f}/{one['goodput_after']:.2f}",
          file=sys.stderr, flush=True)


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
    return spans(per)


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


def version_stderr(cmd):
    """nginx prints its version on stderr."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stderr.splitlines()[0].strip()
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
        print("\n".join(list(SCENARIOS) + list(LAB_SCENARIOS)))
        return
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    seawall, out_dir = os.path.abspath(sys.argv[1]), sys.argv[2]
    names = sys.argv[3:] or list(SCENARIOS) + list(LAB_SCENARIOS)
    for n in names:
        if n not in SCENARIOS and n not in LAB_SCENARIOS:
            raise SystemExit(f"no scenario {n!r}; scenarios: {', '.join(list(SCENARIOS) + list(LAB_SCENARIOS))}")
    os.makedirs(out_dir, exist_ok=True)
    # Three at a time: each run is one light process and one Prometheus.
    threads = []
    for n in [n for n in names if n in SCENARIOS]:
        while sum(t.is_alive() for t in threads) >= 3:
            time.sleep(0.5)
        t = threading.Thread(target=make, args=(seawall, out_dir, n))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    # The lab runs one at a time, alone: its tiers need the machine's cores.
    for n in [n for n in names if n in LAB_SCENARIOS]:
        make_lab(seawall, out_dir, n)


if __name__ == "__main__":
    main()
