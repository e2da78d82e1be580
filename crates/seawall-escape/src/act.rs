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
    flush_urls: Vec<String>,
    /// `Bearer <token>`, checked when the executor is built.
    authorization: Option<http::HeaderValue>,
    http: Option<(tokio::runtime::Runtime, Client<HttpConnector, Empty<Bytes>>)>,
}

impl Executor {
    pub(super) fn new(cfg: &EscapeConfig) -> Result<Executor, EscapeError> {
        let authorization = match &cfg.admin_token {
            Some(t) => {
                seawall_tower::admin::AdminToken::new(t)
                    .map_err(|e| EscapeError::Config(e.to_string()))?;
                let mut v = http::HeaderValue::try_from(format!("Bearer {t}"))
                    .map_err(|e| EscapeError::Config(format!("admin token: {e}")))?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        let fleet = match (&cfg.redis, cfg.apply) {
            (Some(url), true) => Some(Fleet::connect(url, &cfg.key)?),
            _ => None,
        };
        let http = if cfg.apply && !(cfg.admission_urls.is_empty() && cfg.flush_urls.is_empty()) {
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
            flush_urls: cfg.flush_urls.clone(),
            authorization,
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
                "step {step}: {how}: {what} (the knob is ShedLayer::admission; mount \
                 seawall_tower::server::admission_response and pass its URL)"
            ));
            return Ok(());
        }
        for url in &self.admission_urls {
            let target = format!("{url}?percent={percent}");
            if self.http.is_none() {
                say(&format!("step {step}: would POST {target}: {what}"));
                continue;
            }
            let status = self
                .post(&target)
                .map_err(|message| EscapeError::Admission { url: url.clone(), message })?;
            say(&format!("step {step}: POST {target}: {what}: done ({status})"));
        }
        Ok(())
    }

    /// Step 3: drops queued work older than the callers' timeout through the flush URLs, or
    /// prints the check when there are none (a `DeadlineLayer` does it on every seawall server).
    pub(super) fn flush(
        &mut self,
        say: &mut dyn FnMut(&str),
        step: usize,
        caller_timeout_s: f64,
        oldest_s: Option<f64>,
    ) -> Result<(), EscapeError> {
        let what = format!("drop queued work older than the callers' {caller_timeout_s} s timeout");
        let seen = oldest_s.map_or(String::new(), |a| format!(" (oldest queued now {a:.2} s)"));
        if self.flush_urls.is_empty() {
            say(&format!(
                "step {step}: {what}: DeadlineLayer does this on every seawall server; \
                 elsewhere, flush those queues by hand (or pass --flush-url){seen}"
            ));
            return Ok(());
        }
        let ms = (caller_timeout_s * 1000.0).round() as u64;
        for url in &self.flush_urls {
            let target = format!("{url}?older_than_ms={ms}");
            if self.http.is_none() {
                say(&format!("step {step}: would POST {target}: {what}{seen}"));
                continue;
            }
            let status = self
                .post(&target)
                .map_err(|message| EscapeError::Flush { url: url.clone(), message })?;
            say(&format!("step {step}: POST {target}: {what}: done ({status}){seen}"));
        }
        Ok(())
    }

    /// POSTs to an admin URL (bounded by the same timeout as Redis); the status, or what failed.
    fn post(&self, target: &str) -> Result<http::StatusCode, String> {
        let Some((rt, client)) = &self.http else {
            return Err("no HTTP client (dry run)".into());
        };
        let mut req =
            http::Request::post(target).body(Empty::<Bytes>::new()).map_err(|e| e.to_string())?;
        if let Some(v) = &self.authorization {
            req.headers_mut().insert(http::header::AUTHORIZATION, v.clone());
        }
        let status = rt
            .block_on(async { tokio::time::timeout(REDIS_TIMEOUT, client.request(req)).await })
            .map_err(|_| "timed out".to_string())?
            .map_err(|e| e.to_string())?
            .status();
        if status.is_success() { Ok(status) } else { Err(format!("status {status}")) }
    }
}
