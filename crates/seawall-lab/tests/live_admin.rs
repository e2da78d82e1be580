//! The lab's admin endpoints (admission knob, retry switch, dependency flush, fault injection)
//! live on each node's own loopback admin listener behind the stack's bearer token: without the
//! token a request gets 401 and changes nothing, with it the knob turns, and the traffic port
//! serves no `/admin/*` (nor the old `/lab/fault/*`) at all. Also: the token file `seawall lab`
//! writes is private and holds the token.

mod common;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use seawall_lab::run::StackInfo;
use seawall_lab::{LabParams, Stack};

/// One request from a blocking thread: the status and body.
fn call(method: &str, url: &str, token: Option<&str>) -> (u16, String) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client: Client<HttpConnector, Empty<Bytes>> =
            Client::builder(TokioExecutor::new()).build(HttpConnector::new());
        let mut req = http::Request::builder().method(method).uri(url);
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let resp = tokio::time::timeout(
            Duration::from_secs(5),
            client.request(req.body(Empty::new()).unwrap()),
        )
        .await
        .expect("answered within 5 s")
        .expect("connected");
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    })
}

fn check(info: StackInfo) -> Vec<String> {
    let token = info.admin_token.clone();
    let mut seen = Vec::new();
    // The token with its last character changed (to one it is not: a token may end in `x`).
    let last = if token.ends_with('x') { 'y' } else { 'x' };
    let wrong = format!("{}{last}", &token[..token.len() - 1]);
    for n in &info.nodes {
        assert_ne!(n.admin, n.url, "{}: admin on the traffic port", n.role);
        let mut knobs = vec![(n.admission.clone(), "admit_percent")];
        knobs.extend(n.retries.clone().map(|r| (r, "retry_percent")));
        for (url, field) in knobs {
            // Without the token, or with a wrong one: 401, and the knob did not move.
            for t in [None, Some(wrong.as_str())] {
                let (s, _) = call("POST", &format!("{url}?percent=7"), t);
                assert_eq!(s, 401, "{url} with {t:?}");
            }
            let (s, body) = call("GET", &url, Some(&token));
            assert_eq!((s, body.as_str()), (200, format!("{{\"{field}\":100}}").as_str()), "{url}");
            // With it: the knob turns.
            let (s, body) = call("POST", &format!("{url}?percent=7"), Some(&token));
            assert_eq!((s, body), (200, format!("{{\"{field}\":7}}")), "{url}");
            seen.push(url);
        }
        if n.role == "dependency" {
            // Fault injection is an admin endpoint too: 401 without the token (and no fault
            // starts), 204 with it, and the traffic port no longer serves it.
            let fault = format!("{}/admin/fault/slow/1", n.admin);
            assert_eq!(call("POST", &fault, None).0, 401, "{fault}");
            assert_eq!(call("POST", &fault, Some(&wrong)).0, 401, "{fault}");
            assert_eq!(call("POST", &fault, Some(&token)).0, 204, "{fault}");
            let old = format!("{}/lab/fault/slow/1", n.url);
            assert_eq!(call("POST", &old, Some(&token)).0, 404, "{old} on the traffic port");
            seen.push(fault);
        }
        if let Some(flush) = &n.flush {
            assert_eq!(call("POST", &format!("{flush}?older_than_ms=5"), None).0, 401);
            let (s, body) = call("POST", &format!("{flush}?older_than_ms=5"), Some(&token));
            assert_eq!(s, 200, "{flush}: {body}");
            assert!(body.contains("\"flushed_older_than_ms\":5"), "{body}");
            seen.push(flush.clone());
        }
        // The traffic port serves no admin path, token or not.
        for path in ["/admin/admission", "/admin/retries", "/admin/flush"] {
            let (s, _) = call("POST", &format!("{}{path}?percent=0", n.url), Some(&token));
            assert_eq!(s, 404, "{}{path} on the traffic port", n.url);
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_needs_the_token_and_is_off_the_traffic_port() {
    let out = std::env::temp_dir().join(format!("seawall-live-admin-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let params = LabParams {
        duration: Duration::from_secs(4),
        rate: 5.0,
        capacity: 50.0,
        workers: 2,
        nodes_file: Some(out.join("nodes.json")),
        ..LabParams::default()
    };
    let (_, (seen, info)) =
        common::with_running_lab(&params, Stack::Seawall, |info| (check(info.clone()), info)).await;
    // 4 admission knobs, 3 retry switches, 1 fault, 1 flush.
    assert_eq!(seen.len(), 9, "{seen:?}");
    assert!(info.admin_token.len() >= 16);
    let file = info.admin_token_file.clone().expect("a token file beside nodes.json");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), info.admin_token);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", file.display());
    }
    let nodes = std::fs::read_to_string(out.join("nodes.json")).unwrap();
    assert!(!nodes.contains(&info.admin_token), "the token leaked into nodes.json");
    std::fs::remove_dir_all(&out).unwrap();
}
