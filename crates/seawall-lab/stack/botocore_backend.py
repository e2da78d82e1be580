"""A backend whose one call to its dependency goes through botocore's standard retry mode.

The third "before" of the example stack (crates/seawall-lab/stack/README.md): a retrier nobody
on this project wrote, in an SDK. Each request to this server makes one S3 GetObject call
with botocore (endpoint: the dependency, behind `seawall proxy`), configured with botocore's
documented standard mode: `retries = {"mode": "standard", "total_max_attempts": N}` — N
attempts in all, first included. (Beware the other key: botocore's `Config(retries=
{"max_attempts": N})` counts *retries*, N + 1 attempts in all, while the `max_attempts` of
the config file and `AWS_MAX_ATTEMPTS` count attempts; the lab measured 1.9 requests per
call during a fault with `"max_attempts": 1`.) Retried on 500, 502, 503, 504 and throttling errors, exponential
backoff with full jitter (base 1 s, at most 20 s), and a retry quota (500 tokens, 5 per
retry, refunded by successes) that stops retries once spent. Answers 200 if the call
succeeded, else 503.

    python3 botocore_backend.py PORT DEPENDENCY_URL MAX_ATTEMPTS

Listens on 127.0.0.1 only; exits on SIGTERM (the lab stops it that way).
"""

import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import botocore.session
from botocore.config import Config


def main():
    port, endpoint, attempts = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    if not endpoint.startswith(("http://127.", "http://localhost")):
        sys.exit("the dependency must be on loopback")
    session = botocore.session.get_session()
    client = session.create_client(
        "s3",
        region_name="us-east-1",
        endpoint_url=endpoint,
        aws_access_key_id="lab",
        aws_secret_access_key="lab",
        config=Config(
            retries={"mode": "standard", "total_max_attempts": attempts},
            connect_timeout=1,
            read_timeout=2,
            max_pool_connections=64,
            s3={"addressing_style": "path"},
        ),
    )

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            try:
                client.get_object(Bucket="lab", Key="checkout")["Body"].read()
                code = 200
            except Exception:  # every failure, after botocore's retries, is a 503
                code = 503
            self.send_response(code)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.serve_forever()


if __name__ == "__main__":
    main()
