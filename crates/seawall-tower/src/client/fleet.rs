//! A fleet-wide retry kill switch through Redis: one key holds the percentage, a pub/sub
//! channel announces changes (feature `redis-control`).
//!
//! # Why a shared source
//!
//! To end a storm, retries must be turned off across a whole fleet, at once, while it is on
//! fire; an admin endpoint per process is too slow for that. Every process runs a
//! [`follow`] task that applies the key's value to its local [`Control`]; an operator (or
//! [`publish`]) sets the key and publishes on the channel. Pub/sub makes the change take effect
//! in milliseconds; the key is also re-read every `poll` (default 500 ms), so a process that
//! missed the message — it was reconnecting — still switches within a second, and a process that
//! starts later picks up the current value at once. While Redis is unreachable (restarted,
//! partitioned) every process keeps its last value; the task reconnects and re-reads the key, so
//! the fleet reconverges to what Redis holds within about a `poll` of Redis answering again
//! (`tests/server_faults.rs` restarts a real Redis under a follower).
//!
//! From a shell: `redis-cli SET seawall:retries 0 && redis-cli PUBLISH seawall:retries 0`.
//!
//! ```no_run
//! use seawall::control::Control;
//! use seawall_tower::client::fleet;
//! use std::sync::Arc;
//!
//! # async fn run() -> redis::RedisResult<()> {
//! let client = redis::Client::open("redis://127.0.0.1:6379")?;
//! let control = Arc::new(Control::new()); // share it with the RetryPolicy (with_control)
//! let _task = fleet::follow(client.clone(), fleet::FleetKey::default(), control).await?;
//! // elsewhere, an operator's tool:
//! let mut conn = client.get_multiplexed_async_connection().await?;
//! fleet::publish(&mut conn, &fleet::FleetKey::default(), 0).await?; // retries off everywhere
//! # Ok(()) }
//! ```

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_core::Stream;
use redis::aio::MultiplexedConnection;
use seawall::control::Control;

/// Where the fleet's switch lives: the key holding the percentage and the channel announcing
/// changes, and how often the key is re-read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetKey {
    /// Holds the percentage of retries allowed, `0`–`100`.
    pub key: String,
    /// Receives the new percentage on every change.
    pub channel: String,
    /// How often the key is re-read in case a message was missed.
    pub poll: Duration,
}

impl Default for FleetKey {
    /// Key and channel `seawall:retries`, re-read every 500 ms.
    fn default() -> Self {
        FleetKey::new("seawall:retries")
    }
}

impl FleetKey {
    /// Key and channel both named `name`, re-read every 500 ms.
    pub fn new(name: &str) -> Self {
        FleetKey { key: name.into(), channel: name.into(), poll: Duration::from_millis(500) }
    }
}

/// Sets the fleet's retry percentage (0 = kill switch) and announces it.
pub async fn publish(
    conn: &mut MultiplexedConnection,
    at: &FleetKey,
    percent: u8,
) -> redis::RedisResult<()> {
    let p = percent.min(100);
    redis::cmd("SET").arg(&at.key).arg(p).query_async::<()>(conn).await?;
    redis::cmd("PUBLISH").arg(&at.channel).arg(p).query_async::<i64>(conn).await?;
    Ok(())
}

/// Applies a value read from Redis; anything that is not an integer in 0–100 is ignored (a
/// typo must not switch retries on or off).
fn apply(control: &Control, value: &[u8]) {
    let parsed = std::str::from_utf8(value).ok().and_then(|s| s.trim().parse::<u8>().ok());
    if let Some(p) = parsed
        && p != control.percent()
        && control.set_percent(p).is_ok()
    {
        tracing::info!(retry_percent = p, "seawall: fleet retry control changed");
    }
}

async fn read_key(
    conn: &mut MultiplexedConnection,
    key: &str,
) -> redis::RedisResult<Option<Vec<u8>>> {
    redis::cmd("GET").arg(key).query_async::<Option<Vec<u8>>>(conn).await
}

type Messages = Pin<Box<dyn Stream<Item = redis::Msg> + Send>>;

/// A new subscription and connection after Redis went away, each attempt bounded by `limit`.
async fn reconnect(
    client: &redis::Client,
    channel: &str,
    limit: Duration,
) -> Option<(MultiplexedConnection, Messages)> {
    let connect = async {
        let conn = client.get_multiplexed_async_connection().await.ok()?;
        let mut pubsub = client.get_async_pubsub().await.ok()?;
        pubsub.subscribe(channel).await.ok()?;
        let messages: Messages = Box::pin(pubsub.into_on_message());
        Some((conn, messages))
    };
    tokio::time::timeout(limit, connect).await.ok().flatten()
}

/// Reads the key now, then follows changes until the task is aborted. Returns once the
/// subscription is established, so a change published after it returns is never missed.
///
/// If Redis goes away (restarted, unreachable), the control keeps its last value, and the task
/// tries every `poll` to connect and subscribe again; once it has, it re-reads the key, so it
/// reconverges to what Redis holds within about one `poll` of Redis answering again.
pub async fn follow(
    client: redis::Client,
    at: FleetKey,
    control: Arc<Control>,
) -> redis::RedisResult<tokio::task::JoinHandle<()>> {
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(&at.channel).await?;
    if let Some(v) = read_key(&mut conn, &at.key).await.ok().flatten() {
        apply(&control, &v);
    }
    let poll = at.poll.max(Duration::from_millis(10));
    Ok(tokio::spawn(async move {
        let mut link: Option<(MultiplexedConnection, Messages)> =
            Some((conn, Box::pin(pubsub.into_on_message())));
        loop {
            let Some((conn, messages)) = link.as_mut() else {
                tokio::time::sleep(poll).await;
                link = reconnect(&client, &at.channel, poll.max(Duration::from_secs(1))).await;
                match link.as_mut() {
                    Some((conn, _)) => {
                        tracing::info!("seawall: fleet control reconnected");
                        if let Ok(Some(v)) = read_key(conn, &at.key).await {
                            apply(&control, &v);
                        }
                    }
                    None => tracing::debug!("seawall: fleet control: Redis still unreachable"),
                }
                continue;
            };
            let next = poll_fn(|cx| messages.as_mut().poll_next(cx));
            match tokio::time::timeout(poll, next).await {
                Ok(Some(msg)) => apply(&control, msg.get_payload_bytes()),
                Ok(None) => {
                    // Subscription lost (Redis restarted?): keep the last value, reconnect.
                    tracing::warn!("seawall: fleet control subscription lost; reconnecting");
                    link = None;
                }
                Err(_) => match read_key(conn, &at.key).await {
                    Ok(Some(v)) => apply(&control, &v),
                    Ok(None) => {}
                    Err(e) if e.is_unrecoverable_error() || e.is_io_error() => {
                        tracing::warn!("seawall: fleet control lost Redis ({e}); reconnecting");
                        link = None;
                    }
                    Err(_) => {}
                },
            }
        }
    }))
}
