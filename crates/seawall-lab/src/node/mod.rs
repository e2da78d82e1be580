//! One tier of the lab stack: what it is ([`NodeSpec`]) and how it serves ([`serve`]).
//!
//! Every node is an axum server on 127.0.0.1 with `GET /lab/stats`. Tiers (edge, gateway, order)
//! answer `GET /` by calling the next tier through a real HTTP client; the dependency does the
//! work itself. Each node also listens on a second loopback port for its admin endpoints (the
//! knobs, and the dependency's fault injection `POST /admin/fault/{kind}/{ms}`), behind a
//! bearer token (see [`admin`]).

pub mod admin;
pub mod backend;
pub mod client;
pub mod dependency;
pub mod protect;
pub mod spans;
pub mod stats;
pub mod tier;

use std::fmt;
use std::future::{Future, IntoFuture};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use crate::config::Stack;
use crate::{LabError, LabParams};

/// Which tier a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Receives the load generator's requests.
    Edge,
    /// The middle tier.
    Gateway,
    /// The order service, client of the dependency.
    Order,
    /// The built-in dependency: fixed capacity, slower above it, takes faults.
    Dependency,
}

impl Role {
    /// The stack top to bottom.
    pub const ALL: [Role; 4] = [Role::Edge, Role::Gateway, Role::Order, Role::Dependency];

    /// The tier's name in results.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Edge => "edge",
            Role::Gateway => "gateway",
            Role::Order => "order",
            Role::Dependency => "dependency",
        }
    }
}

/// Everything a node needs to start (passed to a child process as JSON).
///
/// `Debug` is written by hand so the admin token never reaches a log: it prints as
/// `Some("<redacted>")`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSpec {
    /// Which tier.
    pub role: Role,
    /// How it retries and protects itself.
    pub stack: Stack,
    /// `http://127.0.0.1:PORT` of the next tier (tiers only).
    pub downstream: Option<String>,
    /// Dependency workers.
    pub workers: u32,
    /// Dependency service time when healthy.
    pub service_time: Duration,
    /// `postgres://…` for the order service's backend, instead of the dependency node.
    pub backend: Option<String>,
    /// The table the backend's statement reads (created by the parent, see [`crate::pg`]).
    pub backend_table: Option<String>,
    /// Seed for jitter.
    pub seed: u64,
    /// `redis://…[#KEY]`: the tier's retry policy follows this fleet switch (see
    /// [`LabParams::fleet`]).
    #[serde(default)]
    pub fleet: Option<String>,
    /// `http://HOST:PORT/v1/traces`: the node exports its spans there (OTLP/HTTP JSON, see
    /// [`spans`]).
    #[serde(default)]
    pub otlp: Option<String>,
    /// The bearer token of the node's admin listener (see [`admin`]). Never serialized: a
    /// command line is readable by every local user, so a child gets it through its
    /// environment ([`ADMIN_TOKEN_ENV`]) instead.
    #[serde(skip)]
    pub admin_token: Option<String>,
}

impl fmt::Debug for NodeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Destructured so a new field cannot be forgotten here.
        let NodeSpec {
            role,
            stack,
            downstream,
            workers,
            service_time,
            backend,
            backend_table,
            seed,
            fleet,
            otlp,
            admin_token,
        } = self;
        f.debug_struct("NodeSpec")
            .field("role", role)
            .field("stack", stack)
            .field("downstream", downstream)
            .field("workers", workers)
            .field("service_time", service_time)
            .field("backend", backend)
            .field("backend_table", backend_table)
            .field("seed", seed)
            .field("fleet", fleet)
            .field("otlp", otlp)
            .field("admin_token", &admin_token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The environment variable a child node reads its admin token from.
pub const ADMIN_TOKEN_ENV: &str = "SEAWALL_LAB_ADMIN_TOKEN";

impl NodeSpec {
    /// The spec of `role` for a run with `params`.
    pub fn new(role: Role, stack: Stack, params: &LabParams, downstream: Option<String>) -> Self {
        NodeSpec {
            role,
            stack,
            downstream,
            workers: params.workers,
            service_time: params.service_time(),
            backend: if role == Role::Order { params.backend.clone() } else { None },
            backend_table: None,
            seed: params.seed.wrapping_add(role as u64),
            fleet: params.fleet.clone(),
            otlp: params.otlp.as_deref().and_then(|u| crate::config::otlp_traces_url(u).ok()),
            admin_token: None,
        }
    }

    /// JSON for the command line of a child.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("spec serializes")
    }

    /// From [`NodeSpec::to_json`].
    pub fn from_json(s: &str) -> Result<Self, LabError> {
        serde_json::from_str(s).map_err(|e| LabError::bad_input("--spec", e.to_string()))
    }
}

/// Serves `spec` on `listener` (traffic) and `admin_listener` (its admin endpoints, behind
/// `spec.admin_token`) until `shutdown` completes.
pub async fn serve(
    spec: NodeSpec,
    listener: TcpListener,
    admin_listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), LabError> {
    let auth = admin::auth(spec.role.as_str(), spec.admin_token.as_deref())?;
    let mut follower = None;
    let tracer;
    let (app, admin_app, stats) = match spec.role {
        Role::Dependency => {
            let dep = Arc::new(dependency::Dependency::new(&spec));
            let stats = dep.stats().clone();
            tracer = dep.tracer().cloned();
            (dependency::router(dep.clone()), dependency::admin_router(&dep, &auth), stats)
        }
        _ => {
            let tier = tier::Tier::new(&spec).await?;
            if let Some(url) = &spec.fleet {
                follower = Some(follow_fleet(url, tier.retry_control()).await.map_err(|e| {
                    LabError::node(spec.role.as_str(), format!("fleet switch {url}: {e}"))
                })?);
            }
            let stats = tier.stats().clone();
            tracer = tier.tracer().cloned();
            (tier::router(tier.clone()), tier::admin_router(&tier, &auth), stats)
        }
    };
    let exporter = match (tracer, &spec.otlp) {
        (Some(t), Some(url)) => {
            let url =
                url.parse().map_err(|e| LabError::bad_input("--otlp", format!("{url:?}: {e}")))?;
            Some(tokio::spawn(t.export(url)))
        }
        _ => None,
    };
    // Not a graceful shutdown: a lab node's in-flight work (hung requests, retry chains) is
    // exactly what must not outlive the run.
    let r = tokio::select! {
        r = axum::serve(listener, app).into_future() => r.map_err(LabError::from),
        r = axum::serve(admin_listener, admin_app).into_future() => r.map_err(LabError::from),
        () = shutdown => Ok(()),
        () = stats::probe_timers(&stats) => Ok(()),
    };
    for task in [follower, exporter].into_iter().flatten() {
        task.abort();
    }
    r
}

/// The Redis URL and key of `--fleet redis://HOST:PORT[/DB][#KEY]` (key `seawall:retries` by
/// default).
pub fn fleet_target(url: &str) -> (&str, &str) {
    match url.split_once('#') {
        Some((u, k)) if !k.is_empty() => (u, k),
        Some((u, _)) => (u, "seawall:retries"),
        None => (url, "seawall:retries"),
    }
}

/// Follows the fleet switch at `url` into `control` until the returned task is aborted.
async fn follow_fleet(
    url: &str,
    control: Arc<seawall::control::Control>,
) -> Result<tokio::task::JoinHandle<()>, String> {
    use seawall_tower::client::fleet;
    let (url, key) = fleet_target(url);
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let follow = fleet::follow(client, fleet::FleetKey::new(key), control);
    tokio::time::timeout(Duration::from_secs(5), follow)
        .await
        .map_err(|_| "no answer within 5 s".to_string())?
        .map_err(|e| e.to_string())
}

/// Binds 127.0.0.1 on a free port.
pub async fn bind_loopback() -> Result<TcpListener, LabError> {
    Ok(TcpListener::bind(("127.0.0.1", 0)).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_the_admin_token() {
        let token = "s3cret-admin-token-0123456789";
        let mut spec = NodeSpec::new(Role::Edge, Stack::Seawall, &LabParams::default(), None);
        spec.admin_token = Some(token.to_string());
        let shown = format!("{spec:?}");
        assert!(!shown.contains(token), "token printed: {shown}");
        assert!(shown.contains("admin_token: Some(\"<redacted>\")"), "{shown}");
        // The other fields still print.
        assert!(shown.contains("role: Edge") && shown.contains("workers:"), "{shown}");
        let pretty = format!("{spec:#?}");
        assert!(!pretty.contains(token), "token printed: {pretty}");

        spec.admin_token = None;
        assert!(format!("{spec:?}").contains("admin_token: None"));
    }
}
