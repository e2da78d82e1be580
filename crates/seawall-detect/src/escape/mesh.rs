//! Escape for a mesh: turn the proxies' retries off, then ramp them back, with the mesh's own
//! switches.
//!
//! - **Istio**: a VirtualService's `http[].retries.attempts` (Istio retries twice by default
//!   when a route sets nothing). Off is `attempts: 0`; the ramp restores the attempts one at a
//!   time. Each change is a `kubectl patch --type=json` of one route, printed so it can be
//!   pasted, or run with `--apply`.
//! - **Envoy**: the runtime key `upstream.use_retry`, the percentage of requests eligible for a
//!   retry (Envoy's router docs, "Runtime"; default 100), set through the admin endpoint's
//!   `POST /runtime_modify?upstream.use_retry=N`. Off is 0; the ramp is the usual stages.
//!
//! Nothing is changed without `apply`; an unreachable target is reported with what would have
//! been done.

use std::fmt;
use std::time::Duration;

/// One change to the mesh.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MeshStep {
    /// A `kubectl` command line (program and arguments).
    Kubectl(Vec<String>),
    /// An Envoy admin `POST` URL.
    EnvoyRuntime(String),
}

impl fmt::Display for MeshStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MeshStep::Kubectl(args) => {
                let quoted: Vec<String> = args
                    .iter()
                    .map(|a| {
                        if a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:".contains(c)) {
                            a.clone()
                        } else {
                            format!("'{}'", a.replace('\'', "'\\''"))
                        }
                    })
                    .collect();
                write!(f, "{}", quoted.join(" "))
            }
            MeshStep::EnvoyRuntime(url) => write!(f, "curl -X POST '{url}'"),
        }
    }
}

/// `kubectl patch` of route `route` of VirtualService `name` to `attempts` retries.
pub fn istio_patch(namespace: &str, name: &str, route: usize, attempts: u32) -> MeshStep {
    let patch = format!(
        r#"[{{"op":"add","path":"/spec/http/{route}/retries","value":{{"attempts":{attempts}}}}}]"#
    );
    MeshStep::Kubectl(
        ["kubectl", "-n", namespace, "patch", "virtualservice", name, "--type=json", "-p", &patch]
            .map(String::from)
            .to_vec(),
    )
}

/// The admin URL setting `upstream.use_retry` to `percent` on the Envoy at `admin`.
pub fn envoy_runtime(admin: &str, percent: u8) -> MeshStep {
    MeshStep::EnvoyRuntime(format!(
        "{}/runtime_modify?upstream.use_retry={}",
        admin.trim_end_matches('/'),
        percent.min(100)
    ))
}

/// The Istio plan: attempts 0 on every route, then back one attempt at a time to `attempts`.
///
/// ```
/// let plan = seawall_detect::escape::mesh::istio_plan("shop", "reviews", &[0], 2);
/// assert_eq!(plan.len(), 3);
/// assert!(plan[0][0].to_string().contains(r#""value":{"attempts":0}"#));
/// ```
pub fn istio_plan(
    namespace: &str,
    name: &str,
    routes: &[usize],
    attempts: u32,
) -> Vec<Vec<MeshStep>> {
    (0..=attempts)
        .map(|a| routes.iter().map(|&r| istio_patch(namespace, name, r, a)).collect())
        .collect()
}

/// The Envoy plan: 0 %, then each ramp stage.
pub fn envoy_plan(admins: &[String], ramp: &[u8]) -> Vec<Vec<MeshStep>> {
    std::iter::once(0)
        .chain(ramp.iter().copied())
        .map(|p| admins.iter().map(|a| envoy_runtime(a, p)).collect())
        .collect()
}

/// Carries out one step: runs `kubectl`, or POSTs to the admin URL (5 s timeout).
pub fn apply(step: &MeshStep) -> Result<String, String> {
    match step {
        MeshStep::Kubectl(args) => {
            let out = std::process::Command::new(&args[0])
                .args(&args[1..])
                .output()
                .map_err(|e| format!("cannot run {}: {e}", args[0]))?;
            let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() {
                Ok(text)
            } else {
                Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
            }
        }
        MeshStep::EnvoyRuntime(url) => post(url),
    }
}

fn post(url: &str) -> Result<String, String> {
    use http_body_util::{BodyExt, Empty, Limited};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let uri: http::Uri = url.parse().map_err(|_| format!("{url}: not a URL"))?;
    if uri.scheme_str() != Some("http") {
        return Err(format!("{url}: expected http://HOST:PORT (the Envoy admin listener)"));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let client = Client::builder(TokioExecutor::new()).build_http::<Empty<bytes::Bytes>>();
        let req = http::Request::post(uri).body(Empty::new()).map_err(|e| e.to_string())?;
        let call = async {
            let resp = client.request(req).await.map_err(|e| format!("{url}: {e}"))?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), 64 << 10)
                .collect()
                .await
                .map_err(|e| e.to_string())?;
            let body = String::from_utf8_lossy(&body.to_bytes()).trim().to_string();
            if status.is_success() {
                Ok(body)
            } else {
                Err(format!("{url}: status {status}: {body}"))
            }
        };
        tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .map_err(|_| format!("{url}: no answer within 5 s"))?
    })
}
