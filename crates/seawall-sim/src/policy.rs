//! Policy presets (`naive` … `seawall`) and how one becomes a real `seawall` `RetryPolicy` per
//! client layer.
//!
//! The simulator never decides a retry itself: every client layer holds a
//! [`seawall::policy::RetryPolicy`] and the engine only schedules what it answers. A preset is
//! the set of knobs that differ between "before" and "after" in a retry-storm incident.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

use seawall::backoff::{Backoff, Jitter};
use seawall::budget::{
    AdaptiveThrottle, AnyBudget, AwsRetryQuota, EnvoyRetryBudget, GrpcThrottle, RatioBudget,
    Unlimited,
};
use seawall::grpc::{Code, CodeSet, HedgingConfig};
use seawall::policy::{PolicyConfig, RetryPolicy};
use serde::{Deserialize, Serialize};

mod schema;

pub use schema::{
    BackoffKind, BudgetKind, ClientOverride, PolicyOverride, ServerLimit, ServerSlot,
};

use crate::error::Error;

/// A built-in policy (see [`PolicySpec::preset`] for what each sets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// 3 attempts, immediate retries at every layer.
    Naive,
    /// 4 attempts, a flat 100 ms.
    Fixed,
    /// 4 attempts from 100 ms doubling, no jitter.
    Exponential,
    /// 3 attempts, full jitter, no budget.
    Jitter,
    /// `Jitter` plus the gRFC A6 token bucket.
    Budget,
    /// `Budget` at one owner layer with every rule of seawall.
    Seawall,
}

impl Preset {
    /// Every preset, in the order `--list` shows them.
    pub const ALL: [Preset; 6] = [
        Preset::Naive,
        Preset::Fixed,
        Preset::Exponential,
        Preset::Jitter,
        Preset::Budget,
        Preset::Seawall,
    ];

    /// The name in scenario files and on the command line (`naive` … `seawall`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Preset::Naive => "naive",
            Preset::Fixed => "fixed",
            Preset::Exponential => "exponential",
            Preset::Jitter => "jitter",
            Preset::Budget => "budget",
            Preset::Seawall => "seawall",
        }
    }

    /// The preset of this name, if there is one.
    pub fn from_name(name: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The preset names, in the order `--list` shows them ([`Preset::ALL`] by name).
pub const PRESETS: [&str; 6] = {
    let mut names = [""; 6];
    let mut i = 0;
    while i < names.len() {
        names[i] = Preset::ALL[i].as_str();
        i += 1;
    }
    names
};

/// A resolved policy: what every client layer and server does under it.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySpec {
    /// Name shown in reports.
    pub name: String,
    /// Attempts per call including the first.
    pub attempts: u32,
    /// Backoff shape.
    pub backoff: BackoffKind,
    /// Backoff base.
    pub base: Duration,
    /// Backoff cap.
    pub cap: Duration,
    /// Retry budget.
    pub budget: BudgetKind,
    /// Only the top retrying layer owns retries; the rest make one attempt and fail fast, so
    /// attempts never multiply across layers.
    pub single_owner: bool,
    /// Lower tiers get the edge's deadline (the time remaining), not a fresh timeout each.
    pub deadline_propagation: bool,
    /// Timed-out attempts are cancelled downstream: work whose caller has gone is dropped.
    pub cancellation: bool,
    /// Give-ups travel upward as "overloaded; don't retry".
    pub pushback: bool,
    /// Servers serve first attempts first, shed retries when queueing, drop doomed work.
    pub server_protection: bool,
    /// A protected tier's in-flight limit (needs `server_protection`).
    pub server_limit: ServerLimit,
    /// How long a request holds its tier's slot: its local work, or its whole handler.
    pub server_slot: ServerSlot,
    /// Clients act on server hints (`Retry-After`, "don't retry"), as the tower layers do.
    /// Default on; off only to show what the hints are worth.
    pub honour_hints: bool,
    /// Replaces herds' spread (reconnect jitter), seconds.
    pub herd_spread_s: Option<f64>,
    /// Hedged copies per call including the first (gRFC A6 `maxAttempts`); 1: no hedging.
    pub hedge_max_attempts: u32,
    /// Delay between hedged copies (gRFC A6 `hedgingDelay`).
    pub hedge_delay: Duration,
    /// The edge client's own settings, replacing the ones above for layer 0.
    pub edge_client: Option<ClientOverride>,
    /// Tier clients' own settings by calling tier, replacing the ones above for that layer.
    pub tier_clients: BTreeMap<String, ClientOverride>,
}

/// A duration field in milliseconds, range-checked before `Duration` could panic on it.
fn ms(v: Option<f64>, field: &str, lo: f64) -> Result<Option<Duration>, Error> {
    match v {
        None => Ok(None),
        Some(x) if x.is_finite() && (lo..=3_600_000.0).contains(&x) => {
            Ok(Some(Duration::from_secs_f64(x / 1000.0)))
        }
        Some(x) => Err(Error::invalid(field, format!("in [{lo}, 3600000] ms"), x)),
    }
}

impl PolicySpec {
    /// A built-in preset by name.
    ///
    /// - `naive`: 3 attempts, immediate retries at every layer (a common default; three such
    ///   layers send 3 × 3 × 3 = 27 attempts per call);
    /// - `fixed`: 3 retries, flat 100 ms (the client of the `index-slowdown` scenario);
    /// - `exponential`: 3 retries from 100 ms doubling, no jitter (the layers of `auth-gc-pause`);
    /// - `jitter`: 3 attempts, full jitter with the AWS defaults (50 ms base, 20 s cap), no budget;
    /// - `budget`: `jitter` plus the gRFC A6 token bucket (10 tokens, ratio 0.1);
    /// - `seawall`: `budget` at one owner layer, every other layer failing fast with pushback,
    ///   deadline propagation, cancellation, and servers that shed retries and drop doomed work.
    pub fn preset(name: &str) -> Option<PolicySpec> {
        Preset::from_name(name).map(PolicySpec::of)
    }

    /// A built-in preset (the list under [`PolicySpec::preset`]), named as the preset.
    pub fn of(preset: Preset) -> PolicySpec {
        let ms = Duration::from_millis;
        let mut p = PolicySpec {
            name: preset.as_str().to_string(),
            attempts: 3,
            backoff: BackoffKind::None,
            base: Duration::ZERO,
            cap: Duration::ZERO,
            budget: BudgetKind::None,
            single_owner: false,
            deadline_propagation: false,
            cancellation: false,
            pushback: false,
            server_protection: false,
            server_limit: ServerLimit::Fixed,
            server_slot: ServerSlot::Service,
            honour_hints: true,
            herd_spread_s: None,
            hedge_max_attempts: 1,
            hedge_delay: Duration::ZERO,
            edge_client: None,
            tier_clients: BTreeMap::new(),
        };
        match preset {
            Preset::Naive => {}
            Preset::Fixed => {
                (p.attempts, p.backoff, p.base, p.cap) =
                    (4, BackoffKind::Constant, ms(100), ms(100))
            }
            Preset::Exponential => {
                (p.attempts, p.backoff, p.base, p.cap) =
                    (4, BackoffKind::Exponential, ms(100), ms(20_000));
            }
            Preset::Jitter | Preset::Budget | Preset::Seawall => {
                (p.backoff, p.base, p.cap) = (BackoffKind::FullJitter, ms(50), ms(20_000));
                if preset != Preset::Jitter {
                    p.budget = BudgetKind::Grpc;
                }
                if preset == Preset::Seawall {
                    p.single_owner = true;
                    p.deadline_propagation = true;
                    p.cancellation = true;
                    p.pushback = true;
                    p.server_protection = true;
                }
            }
        }
        p
    }

    /// Applies a scenario's adjustments; `field` prefixes error messages.
    pub(crate) fn apply(mut self, o: &PolicyOverride, field: &str) -> Result<Self, Error> {
        let dur = |v: Option<f64>, key: &str, cur: Duration| {
            Ok::<_, Error>(ms(v, &format!("{field}.{key}"), 0.0)?.unwrap_or(cur))
        };
        if let Some(a) = o.attempts {
            if !(1..=seawall::policy::MAX_ATTEMPTS).contains(&a) {
                return Err(Error::invalid(format!("{field}.attempts"), "in [1, 10]", a));
            }
            self.attempts = a;
        }
        self.backoff = o.backoff.unwrap_or(self.backoff);
        self.base = dur(o.base_ms, "base_ms", self.base)?;
        self.cap = dur(o.cap_ms, "cap_ms", self.cap)?;
        self.budget = o.budget.unwrap_or(self.budget);
        self.single_owner = o.single_owner.unwrap_or(self.single_owner);
        self.deadline_propagation = o.deadline_propagation.unwrap_or(self.deadline_propagation);
        self.cancellation = o.cancellation.unwrap_or(self.cancellation);
        self.pushback = o.pushback.unwrap_or(self.pushback);
        self.server_protection = o.server_protection.unwrap_or(self.server_protection);
        self.server_limit = o.server_limit.unwrap_or(self.server_limit);
        self.server_slot = o.server_slot.unwrap_or(self.server_slot);
        if self.server_limit == ServerLimit::Gradient && !self.server_protection {
            return Err(Error::invalid(
                format!("{field}.server_limit"),
                "\"fixed\" unless server_protection = true (a tier without load shedding has no limit to adapt)",
                "\"gradient\"",
            ));
        }
        self.honour_hints = o.honour_hints.unwrap_or(self.honour_hints);
        if let Some(s) = o.herd_spread_s {
            if !(s.is_finite() && (0.0..=86_400.0).contains(&s)) {
                return Err(Error::invalid(format!("{field}.herd_spread_s"), "in [0, 86400] s", s));
            }
            self.herd_spread_s = Some(s);
        }
        self.hedge_max_attempts = o.hedge_max_attempts.unwrap_or(self.hedge_max_attempts);
        self.hedge_delay = dur(o.hedge_delay_ms, "hedge_delay_ms", self.hedge_delay)?;
        self.hedging(&format!("{field}.hedge_max_attempts"))?;
        self.edge_client = o.edge.clone().or(self.edge_client);
        self.tier_clients.extend(o.tier.iter().map(|(k, v)| (k.clone(), v.clone())));
        Ok(self)
    }

    /// The settings of one client layer: this policy with the layer's own `client` settings (if
    /// any) applied, and its per-try timeout (`timeout_ms` of the tier or edge unless the client
    /// settings replace it). `field` (e.g. `policies.P.tier.app`) prefixes errors, which come
    /// from the core's own constructors, so a layer is checked exactly as it will run.
    pub(crate) fn for_client(
        &self,
        client: Option<&ClientOverride>,
        timeout_ms: Option<f64>,
        field: &str,
    ) -> Result<(Cow<'_, PolicySpec>, Option<Duration>), Error> {
        let Some(c) = client else {
            let timeout = timeout_ms.map(|ms| Duration::from_secs_f64(ms / 1000.0));
            return Ok((Cow::Borrowed(self), timeout));
        };
        let mut p = self.clone();
        p.name = field.strip_prefix("policies.").unwrap_or(field).to_string();
        p.attempts = c.attempts.unwrap_or(p.attempts);
        p.backoff = c.backoff.unwrap_or(p.backoff);
        p.base = ms(c.base_ms, &format!("{field}.base_ms"), 0.0)?.unwrap_or(p.base);
        p.cap = ms(c.cap_ms, &format!("{field}.cap_ms"), 0.0)?.unwrap_or(p.cap);
        p.budget = c.budget.unwrap_or(p.budget);
        p.hedge_max_attempts = c.hedge_max_attempts.unwrap_or(p.hedge_max_attempts);
        p.hedge_delay =
            ms(c.hedge_delay_ms, &format!("{field}.hedge_delay_ms"), 0.0)?.unwrap_or(p.hedge_delay);
        p.hedging(&format!("{field}.hedge_max_attempts"))?;
        let own = ms(c.timeout_ms, &format!("{field}.timeout_ms"), 1.0)?;
        let timeout = own.or_else(|| timeout_ms.map(|ms| Duration::from_secs_f64(ms / 1000.0)));
        // Build it as a retrying owner: the core's constructors check every value even where
        // the run will make this layer fail fast.
        p.build(true, true, timeout, 0)?;
        Ok((Cow::Owned(p), timeout))
    }

    fn backoff_value(&self) -> Result<Backoff, Error> {
        let b = match self.backoff {
            BackoffKind::None => Backoff::new(Jitter::None, Duration::ZERO, Duration::ZERO, 1.0),
            BackoffKind::Constant => Backoff::constant(self.base),
            BackoffKind::Exponential => Backoff::new(Jitter::None, self.base, self.cap, 2.0),
            BackoffKind::FullJitter => Backoff::new(Jitter::Full, self.base, self.cap, 2.0),
            BackoffKind::EqualJitter => Backoff::new(Jitter::Equal, self.base, self.cap, 2.0),
            BackoffKind::Decorrelated => {
                Backoff::new(Jitter::Decorrelated, self.base, self.cap, 2.0)
            }
        };
        b.map_err(|e| Error::config(&self.name, e))
    }

    /// The layer's gRFC A6 `hedgingPolicy`, `None` when it does not hedge
    /// (`hedge_max_attempts` = 1). A6 clamps `maxAttempts` to 5; here more is an error, as is a
    /// budget the A6 schedule cannot spend from (copies count against the `retryThrottling`
    /// token bucket, `budget = "grpc"`, or nothing, `"none"`). `UNAVAILABLE` is the one
    /// non-fatal code: see `engine/hedge.rs` for how the simulator's answers map onto codes.
    pub(crate) fn hedging(&self, field: &str) -> Result<Option<HedgingConfig>, Error> {
        match self.hedge_max_attempts {
            1 => return Ok(None),
            2..=5 => {}
            n => return Err(Error::invalid(field, "in [1, 5] (1: no hedging)", n)),
        }
        if !matches!(self.budget, BudgetKind::None | BudgetKind::Grpc) {
            let field = field.replace("hedge_max_attempts", "budget");
            let kind = format!("{:?}", self.budget).to_lowercase();
            return Err(Error::invalid(field, "\"grpc\" or \"none\" with hedging", kind));
        }
        Ok(Some(HedgingConfig {
            max_attempts: self.hedge_max_attempts,
            configured_max_attempts: u64::from(self.hedge_max_attempts),
            hedging_delay: self.hedge_delay,
            non_fatal: CodeSet::of(&[Code::UNAVAILABLE]),
        }))
    }

    /// Whether a layer built with these `retries` / `owner` flags hedges: a layer that may
    /// retry (copies multiply load exactly as retries do, so under `single_owner` only the
    /// owner may send them).
    pub(crate) fn hedges(&self, retries: bool, owner: bool) -> bool {
        self.hedge_max_attempts > 1 && retries && (owner || !self.single_owner)
    }

    /// The token bucket a hedged layer's copies spend from (a fresh one per instance), as the
    /// tonic layer's: `None` under `budget = "none"`.
    pub(crate) fn hedge_throttle(&self) -> Option<GrpcThrottle> {
        (self.budget == BudgetKind::Grpc).then(GrpcThrottle::default)
    }

    /// The real policy of one client layer.
    ///
    /// `retries` is false for layers that never retry (a person at the edge); `owner` tells
    /// whether this is the top retrying layer (the only one allowed to retry when
    /// `single_owner`). `timeout` is the layer's per-attempt timeout.
    pub(crate) fn build(
        &self,
        retries: bool,
        owner: bool,
        timeout: Option<Duration>,
        seed: u64,
    ) -> Result<RetryPolicy<AnyBudget>, Error> {
        let cfg_err = |e| Error::config(&self.name, e);
        // A hedged layer makes one attempt through its policy (the first copy, for the
        // deadline, the breaker and the call's end); the copies and their budget are the A6
        // schedule's (`engine/hedge.rs`).
        let hedged = self.hedges(retries, owner);
        let mut cfg = if !retries || (self.single_owner && !owner) || hedged {
            PolicyConfig::fail_fast()
        } else {
            PolicyConfig::default()
                .with_max_attempts(self.attempts)
                .map_err(cfg_err)?
                .with_backoff(self.backoff_value()?)
        };
        if let Some(t) = timeout {
            cfg = cfg.with_per_try_timeout(t).map_err(cfg_err)?;
        }
        let budget = match self.budget {
            _ if !retries || hedged => AnyBudget::Unlimited(Unlimited),
            BudgetKind::None => AnyBudget::Unlimited(Unlimited),
            BudgetKind::Grpc => AnyBudget::Grpc(GrpcThrottle::default()),
            BudgetKind::Aws => AnyBudget::Aws(AwsRetryQuota::default()),
            BudgetKind::Ratio => AnyBudget::Ratio(RatioBudget::default()),
            BudgetKind::Envoy => AnyBudget::Envoy(EnvoyRetryBudget::default()),
            BudgetKind::Adaptive => AnyBudget::Adaptive(AdaptiveThrottle::default()),
        };
        Ok(RetryPolicy::new(cfg, budget).with_seed(seed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_builds_and_only_seawall_protects() {
        for name in PRESETS {
            let p = PolicySpec::preset(name).unwrap();
            assert_eq!(p.server_protection, name == "seawall", "{name}");
            let built = p.build(true, true, Some(Duration::from_secs(1)), 1).unwrap();
            assert!(built.config().max_attempts() >= 3);
        }
        assert!(PolicySpec::preset("nope").is_none());
    }

    #[test]
    fn seawall_lower_layers_fail_fast() {
        let p = PolicySpec::preset("seawall").unwrap();
        let lower = p.build(true, false, None, 1).unwrap();
        assert_eq!(lower.config().max_attempts(), 1);
    }

    #[test]
    fn overrides_are_range_checked() {
        let p = PolicySpec::preset("naive").unwrap();
        let bad = PolicyOverride { attempts: Some(11), ..Default::default() };
        assert!(p.clone().apply(&bad, "policies.naive").is_err());
        let ok = PolicyOverride { attempts: Some(2), ..Default::default() };
        assert_eq!(p.apply(&ok, "policies.naive").unwrap().attempts, 2);
    }

    #[test]
    fn hedging_is_checked_and_spends_only_from_the_a6_bucket() {
        let p = PolicySpec::preset("budget").unwrap();
        let hedge = |n, budget| PolicyOverride {
            hedge_max_attempts: Some(n),
            hedge_delay_ms: Some(20.0),
            budget,
            ..Default::default()
        };
        let e = p.clone().apply(&hedge(6, None), "policies.b").unwrap_err().to_string();
        assert!(e.contains("policies.b.hedge_max_attempts"), "{e}");
        let e = p.clone().apply(&hedge(3, Some(BudgetKind::Aws)), "policies.b").unwrap_err();
        assert!(e.to_string().contains("policies.b.budget"), "{e}");
        let ok = p.apply(&hedge(3, None), "policies.b").unwrap();
        let a6 = ok.hedging("f").unwrap().unwrap();
        assert_eq!((a6.max_attempts, a6.hedging_delay), (3, Duration::from_millis(20)));
        assert!(ok.hedges(true, true) && !ok.hedges(false, true));
        // A hedged layer's own policy makes one attempt: the copies are the A6 schedule's.
        assert_eq!(ok.build(true, true, None, 1).unwrap().config().max_attempts(), 1);
        assert!(ok.hedge_throttle().is_some());
    }
}
