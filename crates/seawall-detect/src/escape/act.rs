//! The two things `escape` changes: the fleet's retry switch and the shedding layers' admission.

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use redis::aio::MultiplexedConnection;
use seawall_tower::client::fleet::{self, FleetKey};

use super::{EscapeConfig, EscapeError};

/// A blocking handle on the fleet's retry switch in Redis (`seawall_tower::client::fleet`).
#[derive(Debug)]
pub struct Fleet {
    rt: tokio::runtime::Runtime,
    conn: MultiplexedConnection,
    at: FleetKey,
}

/// Redis commands and connecting get this long before the escape reports the failure.
const REDIS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl Fleet {
    /// Connects to `url` (e.g. `redis://127.0.0.1:6379`) for the switch at `key`.
    pub fn connect(url: &str, key: &str) -> Result<Fleet, EscapeError> {
        let err = |e: String| EscapeError::Redis(e);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| err(e.to_string()))?;
        let client = redis::Client::open(url).map_err(|e| err(e.to_string()))?;
        let conn = rt
            .block_on(async {
                let connect = client.get_multiplexed_async_connection();
                tokio::time::timeout(REDIS_TIMEOUT, connect).await
            })
            .map_err(|_| err(format!("{url}: no connection within {REDIS_TIMEOUT:?}")))?
            .map_err(|e| err(format!("{url}: {e}")))?;
        Ok(Fleet { rt, conn, at: FleetKey::new(key) })
    }

    /// The switch's current percentage (`None` if unset or not a number: followers then keep
    /// their local setting, 100 % by default).
    pub fn get(&mut self) -> Result<Option<u8>, EscapeError> {
        let cmd = redis::cmd("GET").arg(&self.at.key).to_owned();
        let v: Option<String> = self
            .rt
            .block_on(async {
                tokio::time::timeout(REDIS_TIMEOUT, cmd.query_async(&mut self.conn)).await
            })
            .map_err(|_| EscapeError::Redis("GET timed out".into()))?
            .map_err(|e| EscapeError::Redis(e.to_string()))?;
        Ok(v.and_then(|s| s.trim().parse().ok()))
    }

    /// Sets the percentage and announces it (`SET` + `PUBLISH`, through `fleet::publish`).
    pub fn set(&mut self, percent: u8) -> Result<(), EscapeError> {
        self.rt
            .block_on(async {
                let publish = fleet::publish(&mut self.conn, &self.at, percent);
                tokio::time::timeout(REDIS_TIMEOUT, publish).await
            })
            .map_err(|_| EscapeError::Redis("SET/PUBLISH timed out".into()))?
            .map_err(|e| EscapeError::Redis(e.to_string()))
    }
}

/// Carries out (or, in a dry run, describes) each change, printing one line per change.
pub(super) struct Executor {
    apply: bool,
    key: String,
    fleet: Option<Fleet>,
    admission_urls: Vec<String>,
    http: Option<(tokio::runtime::Runtime, Client<HttpConnector, Empty<Bytes>>)>,
}

impl Executor {
    pub(super) fn new(cfg: &EscapeConfig) -> Result<Executor, EscapeError> {
        let fleet = match (&cfg.redis, cfg.apply) {
            (Some(url), true) => Some(Fleet::connect(url, &cfg.key)?),
            _ => None,
        };
        let http = if cfg.apply && !cfg.admission_urls.is_empty() {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| EscapeError::Config(e.to_string()))?;
            let client = {
                let _guard = rt.enter();
                Client::builder(TokioExecutor::new()).build(HttpConnector::new())
            };
            Some((rt, client))
        } else {
            None
        };
        Ok(Executor {
            apply: cfg.apply,
            key: cfg.key.clone(),
            fleet,
            admission_urls: cfg.admission_urls.clone(),
            http,
        })
    }

    pub(super) fn apply(&self) -> bool {
        self.apply
    }

    pub(super) fn retries(
        &mut self,
        say: &mut dyn FnMut(&str),
        step: usize,
        percent: u8,
    ) -> Result<(), EscapeError> {
        let what = format!("retries → {percent} % fleet-wide (SET + PUBLISH {})", self.key);
        match self.fleet.as_mut() {
            Some(f) => {
                let was = f.get()?.map_or("unset".to_string(), |p| format!("{p} %"));
                f.set(percent)?;
                say(&format!("step {step}: {what}: done (was {was})"));
            }
            None if self.apply => say(&format!(
                "step {step}: MANUAL (no --redis): {what}: \
                 redis-cli SET {k} {percent} && redis-cli PUBLISH {k} {percent}",
                k = self.key
            )),
            None => say(&format!("step {step}: would set {what}")),
        }
        Ok(())
    }

    pub(super) fn admission(
        &mut self,
        say: &mut dyn FnMut(&str),
        step: usize,
        percent: u8,
    ) -> Result<(), EscapeError> {
        let what = format!("admission → {percent} % of normal at the shedding layers");
        if self.admission_urls.is_empty() {
            let how = if self.apply { "MANUAL (no --admission-url)" } else { "would set" };
            say(&format!(
                "step {step}: {how}: {what} (ShedLayer has no runtime knob yet: lower its \
                 in-flight limit or shed at the gateway)"
            ));
            return Ok(());
        }
        for url in &self.admission_urls {
            let target = format!("{url}?percent={percent}");
            let Some((rt, client)) = &self.http else {
                say(&format!("step {step}: would POST {target}: {what}"));
                continue;
            };
            let req = http::Request::post(&target)
                .body(Empty::<Bytes>::new())
                .map_err(|e| EscapeError::Admission { url: url.clone(), message: e.to_string() })?;
            let status = rt
                .block_on(async { tokio::time::timeout(REDIS_TIMEOUT, client.request(req)).await })
                .map_err(|_| EscapeError::Admission {
                    url: url.clone(),
                    message: "timed out".into(),
                })?
                .map_err(|e| EscapeError::Admission { url: url.clone(), message: e.to_string() })?
                .status();
            if !status.is_success() {
                return Err(EscapeError::Admission {
                    url: url.clone(),
                    message: format!("status {status}"),
                });
            }
            say(&format!("step {step}: POST {target}: {what}: done ({status})"));
        }
        Ok(())
    }
}
