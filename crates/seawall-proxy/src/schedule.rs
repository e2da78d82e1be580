//! The decision: given the time since the proxy started and the faults, what happens to the next
//! connection or request. A pure function of time and an injected random number, so schedules
//! and the cold-restart ramp are tested on virtual time.

use std::sync::Mutex;
use std::time::Duration;

use seawall::rng::Rng;

use super::fault::{FailMode, Fault, FaultKind};

/// The most faults (scheduled and live together) a proxy holds.
pub const MAX_FAULTS: usize = 64;

/// What the proxy does with one connection or request.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Action {
    /// Forward it, after `delay` (the sum of every active `slow`).
    Pass {
        /// Added latency.
        delay: Duration,
    },
    /// Refuse it.
    Fail {
        /// How.
        mode: FailMode,
        /// Which fault kind refused it (`fail` or `restart-cold`), for the metrics.
        by: &'static str,
    },
    /// Hold it until `until` (time since start), then go on deciding; give up at `give_up`.
    Hold {
        /// When the holding fault ends.
        until: Duration,
        /// When this hold's bound is reached (then the connection is dropped).
        give_up: Duration,
    },
}

/// The share of traffic a `restart-cold` fault serves at `t`, in `[0, 1]`: 0 during the
/// refusal, then linear from `floor` to 1 over `warmup`, then 1.
///
/// ```
/// use seawall_proxy::schedule::cold_share;
/// use std::time::Duration;
/// let s = |t| cold_share(Duration::from_secs(5), Duration::from_secs(10), Duration::from_secs(20), 10.0, Duration::from_secs(t));
/// assert_eq!((s(4), s(5), s(14)), (1.0, 0.0, 0.0));
/// assert!((s(15) - 0.1).abs() < 1e-9 && (s(25) - 0.55).abs() < 1e-9);
/// assert_eq!(s(35), 1.0);
/// ```
pub fn cold_share(
    start: Duration,
    down: Duration,
    warmup: Duration,
    floor: f64,
    t: Duration,
) -> f64 {
    let floor = (floor / 100.0).clamp(0.0, 1.0);
    if t < start {
        return 1.0;
    }
    let since = t - start;
    if since < down {
        return 0.0;
    }
    let warm = since - down;
    if warm >= warmup || warmup.is_zero() {
        return 1.0;
    }
    floor + (1.0 - floor) * (warm.as_secs_f64() / warmup.as_secs_f64())
}

/// Where a decision's random numbers come from, and so what unit a fault's share (`pct`) is a
/// share of.
///
/// Any [`Rng`] draws afresh for every decision: the share is a share of *requests* (HTTP mode).
/// [`PerConnection`] draws a fault's share and its cold-restart draw once per connection and
/// reuses them for every request on it: the share is a share of *connections* (TCP mode, where
/// a PostgreSQL session is a connection), so `partial:…,pct=50` fails half the sessions, not
/// some statement of most of them.
pub trait Draws {
    /// The draw in `[0, 1)` that decides whether `fault`'s `pct` touches this unit.
    fn share(&mut self, fault: &Fault) -> f64;
    /// The draw in `[0, 1)` compared with a `restart-cold` fault's served share.
    fn cold(&mut self, fault: &Fault) -> f64;
    /// A fresh draw in `[0, 1)` for a latency (always per request).
    fn latency(&mut self) -> f64;
}

impl<R: Rng> Draws for R {
    fn share(&mut self, _: &Fault) -> f64 {
        self.next_f64()
    }

    fn cold(&mut self, _: &Fault) -> f64 {
        self.next_f64()
    }

    fn latency(&mut self) -> f64 {
        self.next_f64()
    }
}

/// Draws remembered for one connection: each fault's share and cold draws are made the first
/// time the connection meets the fault and kept ([`Draws`]). Bounded: at most
/// [`MAX_FAULTS`] × 2 faults remembered, the oldest forgotten first.
#[derive(Debug)]
pub struct PerConnection<R> {
    rng: R,
    memo: std::collections::VecDeque<(Fault, f64, f64)>,
}

impl<R: Rng> PerConnection<R> {
    /// Draws from `rng`, none remembered yet.
    pub fn new(rng: R) -> Self {
        PerConnection { rng, memo: std::collections::VecDeque::new() }
    }

    fn entry(&mut self, fault: &Fault) -> (f64, f64) {
        if let Some(&(_, share, cold)) = self.memo.iter().find(|(f, _, _)| f == fault) {
            return (share, cold);
        }
        let (share, cold) = (self.rng.next_f64(), self.rng.next_f64());
        if self.memo.len() >= 2 * MAX_FAULTS {
            self.memo.pop_front();
        }
        self.memo.push_back((*fault, share, cold));
        (share, cold)
    }
}

impl<R: Rng> Draws for PerConnection<R> {
    fn share(&mut self, fault: &Fault) -> f64 {
        self.entry(fault).0
    }

    fn cold(&mut self, fault: &Fault) -> f64 {
        self.entry(fault).1
    }

    fn latency(&mut self) -> f64 {
        self.rng.next_f64()
    }
}

/// What happens at `t` to one connection or request, under `faults`. `draws` gives each
/// fault's share (`pct`) draw, the cold-restart draw and the latency ([`Draws`]: per request
/// from a plain [`Rng`], per connection from [`PerConnection`]), so one seed gives one sequence
/// of decisions.
///
/// Precedence: a fail (or a cold refusal) wins over a hold, a hold over slowness; delays add
/// up. Bandwidth is not a per-request decision: see [`bandwidth_at`].
///
/// ```
/// use seawall::rng::SeededRng;
/// use seawall_proxy::schedule::{decide, Action};
/// use std::time::Duration;
/// let faults = ["fail:10@5".parse().unwrap()];
/// let mut rng = SeededRng::new(1);
/// assert!(matches!(decide(Duration::from_secs(4), &faults, &mut rng), Action::Pass { .. }));
/// assert!(matches!(decide(Duration::from_secs(5), &faults, &mut rng), Action::Fail { .. }));
/// assert!(matches!(decide(Duration::from_secs(15), &faults, &mut rng), Action::Pass { .. }));
/// ```
pub fn decide(t: Duration, faults: &[Fault], draws: &mut impl Draws) -> Action {
    let mut delay = Duration::ZERO;
    let mut fail = None;
    let mut hold: Option<(Duration, Duration)> = None;
    for f in faults.iter().filter(|f| f.active_at(t)) {
        if f.percent < 100.0 && draws.share(f) * 100.0 >= f.percent {
            continue;
        }
        match f.kind {
            FaultKind::Fail(mode) => fail = fail.or(Some((mode, "fail"))),
            FaultKind::RestartCold { warmup, floor } => {
                let share = cold_share(f.start, f.duration, warmup, floor, t);
                if share < 1.0 && draws.cold(f) >= share {
                    // Down (nothing served): the server is gone, and so are its connections. Warming up:
                    // it answers, but refuses what it cannot take yet (503, or a reset in TCP).
                    let mode = if share == 0.0 { FailMode::Refuse } else { FailMode::Status };
                    fail = fail.or(Some((mode, "restart-cold")));
                }
            }
            FaultKind::Hang { max } => {
                let (until, give_up) = (f.end(), t.saturating_add(max));
                hold = Some(hold.map_or((until, give_up), |(u, g)| (u.max(until), g.min(give_up))));
            }
            FaultKind::Slow(d) => delay = delay.saturating_add(d.sample(draws.latency())),
            FaultKind::Bandwidth { .. } => {}
        }
    }
    if let Some((mode, by)) = fail {
        Action::Fail { mode, by }
    } else if let Some((until, give_up)) = hold {
        Action::Hold { until, give_up }
    } else {
        Action::Pass { delay }
    }
}

/// The tightest `bandwidth` active at `t`, bytes per second per connection and direction. It
/// applies to every connection while active (its `pct` is not drawn: a link is slow for all).
pub fn bandwidth_at(t: Duration, faults: &[Fault]) -> Option<u64> {
    faults
        .iter()
        .filter(|f| f.active_at(t))
        .filter_map(|f| match f.kind {
            FaultKind::Bandwidth { bytes_per_s } => Some(bytes_per_s),
            _ => None,
        })
        .min()
}

/// Whether the listener should be closed at `t` (a `fail` with `mode=refuse`, or a
/// `restart-cold` before its warm-up), and until when.
///
/// ```
/// use seawall_proxy::schedule::refusing_until;
/// use std::time::Duration;
/// let f = ["restart-cold:5@10,warmup=20".parse().unwrap(), "fail:1@30,mode=refuse".parse().unwrap()];
/// let at = |t| refusing_until(Duration::from_secs(t), &f).map(|d| d.as_secs());
/// assert_eq!([at(9), at(10), at(14), at(15), at(30), at(31)], [None, Some(15), Some(15), None, Some(31), None]);
/// ```
pub fn refusing_until(t: Duration, faults: &[Fault]) -> Option<Duration> {
    faults
        .iter()
        .filter_map(|f| match f.kind {
            FaultKind::Fail(FailMode::Refuse) if f.active_at(t) => Some(f.end()),
            FaultKind::RestartCold { .. } if f.start <= t && t < f.start + f.duration => {
                Some(f.start + f.duration)
            }
            _ => None,
        })
        .max()
}

/// The proxy's faults: the schedule given at start plus those posted live, bounded in number.
#[derive(Debug, Default)]
pub struct Faults(Mutex<Vec<Fault>>);

impl Faults {
    /// A set holding `schedule`, truncated to [`MAX_FAULTS`].
    pub fn new(mut schedule: Vec<Fault>) -> Self {
        schedule.truncate(MAX_FAULTS);
        Faults(Mutex::new(schedule))
    }

    /// Adds a fault; `false` (and nothing added) when [`MAX_FAULTS`] are held. Faults that
    /// ended before `now` are dropped first.
    pub fn add(&self, fault: Fault, now: Duration) -> bool {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        v.retain(|f| f.end() > now);
        if v.len() >= MAX_FAULTS {
            return false;
        }
        v.push(fault);
        true
    }

    /// Removes every fault (scheduled and live); returns how many.
    pub fn clear(&self) -> usize {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *v).len()
    }

    /// A copy of the faults.
    pub fn snapshot(&self) -> Vec<Fault> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// [`bandwidth_at`] over the current faults.
    pub fn bandwidth_at(&self, t: Duration) -> Option<u64> {
        bandwidth_at(t, &self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The end of the latest `hang` active at `t`, if any (its `pct` not drawn: this is for a
    /// request already held).
    pub fn hang_until(&self, t: Duration) -> Option<Duration> {
        let v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        v.iter()
            .filter(|f| matches!(f.kind, FaultKind::Hang { .. }) && f.active_at(t))
            .map(Fault::end)
            .max()
    }

    /// [`refusing_until`] over the current faults.
    pub fn refusing_until(&self, t: Duration) -> Option<Duration> {
        refusing_until(t, &self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// [`decide`] over the current faults.
    pub fn decide(&self, t: Duration, draws: &mut impl Draws) -> Action {
        let v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        decide(t, &v, draws)
    }
}

#[cfg(test)]
mod tests {
    use seawall::rng::SeededRng;

    use super::*;
    use crate::fault::Delay;

    fn s(x: f64) -> Duration {
        Duration::from_secs_f64(x)
    }

    fn parse(v: &[&str]) -> Vec<Fault> {
        v.iter().map(|f| f.parse().unwrap()).collect()
    }

    #[test]
    fn schedule_is_half_open_and_faults_combine() {
        let faults =
            parse(&["fail:2@10", "hang:5@1,max=2", "slow:10@0,latency=30", "slow:1@0,latency=20"]);
        let mut rng = SeededRng::new(3);
        assert_eq!(decide(s(0.5), &faults, &mut rng), Action::Pass { delay: s(0.05) });
        assert_eq!(
            decide(s(1.0), &faults, &mut rng),
            Action::Hold { until: s(6.0), give_up: s(3.0) }
        );
        assert_eq!(decide(s(6.0), &faults, &mut rng), Action::Pass { delay: s(0.03) });
        assert!(matches!(decide(s(10.0), &faults, &mut rng), Action::Fail { by: "fail", .. }));
        assert!(matches!(decide(s(11.999), &faults, &mut rng), Action::Fail { .. }));
        assert!(matches!(decide(s(12.0), &faults, &mut rng), Action::Pass { .. }));
        let bw = parse(&["bandwidth:5@1,rate=64", "bandwidth:2@2,rate=8"]);
        assert_eq!(
            [0.5, 1.0, 2.5, 5.9, 6.0].map(|t| bandwidth_at(s(t), &bw)),
            [None, Some(64_000), Some(8_000), Some(64_000), None]
        );
    }

    #[test]
    fn cold_restart_refuses_then_ramps() {
        let faults = parse(&["restart-cold:5@10,warmup=10,floor=0"]);
        let share = |t: f64| {
            let mut rng = SeededRng::new(9);
            let n = 4000;
            let served = (0..n)
                .filter(|_| matches!(decide(s(t), &faults, &mut rng), Action::Pass { .. }))
                .count();
            served as f64 / n as f64
        };
        assert_eq!(share(9.9), 1.0);
        assert_eq!(share(10.0), 0.0);
        assert_eq!(share(14.99), 0.0);
        assert!((share(17.5) - 0.25).abs() < 0.03, "{}", share(17.5));
        assert!((share(22.5) - 0.75).abs() < 0.03, "{}", share(22.5));
        assert_eq!(share(25.0), 1.0);
    }

    #[test]
    fn partial_touches_its_share() {
        let faults = parse(&["partial:10,pct=30"]);
        let mut rng = SeededRng::new(5);
        let failed = (0..10_000)
            .filter(|_| matches!(decide(s(1.0), &faults, &mut rng), Action::Fail { .. }))
            .count();
        assert!((2800..3200).contains(&failed), "{failed}");
    }

    /// Per connection (TCP mode), `pct=50` fails half the connections, each one for all of its
    /// requests or for none; `slow` still draws a latency per request. Mutation checked: making
    /// `PerConnection::share` draw afresh (as a plain `Rng` does) mixes the two within a
    /// connection and fails both assertions (72–93 % of sessions meet a failure).
    #[test]
    fn per_connection_shares_are_shares_of_connections() {
        let faults = parse(&["partial:10,pct=50"]);
        let (mut all, mut none) = (0, 0);
        for seed in 0..2000 {
            let mut draws = PerConnection::new(SeededRng::new(seed));
            let failed = (0..10)
                .filter(|_| matches!(decide(s(1.0), &faults, &mut draws), Action::Fail { .. }))
                .count();
            match failed {
                10 => all += 1,
                0 => none += 1,
                n => panic!("connection {seed}: {n} of 10 requests failed"),
            }
        }
        assert!((900..1100).contains(&all), "{all} of 2000 connections failed");
        assert_eq!(all + none, 2000);
        let slow = parse(&["slow:10,latency=100,jitter=100"]);
        let mut draws = PerConnection::new(SeededRng::new(1));
        let a = decide(s(1.0), &slow, &mut draws);
        let b = decide(s(1.0), &slow, &mut draws);
        assert_ne!(a, b, "each statement draws its own latency");
    }

    /// While a cold restart is down, what it refuses is refused as by a closed server (the
    /// connection goes: a reset, or a dropped HTTP connection), not answered 503; while it warms
    /// up, what it cannot take yet is answered 503. Mutation checked: always `FailMode::Status`
    /// fails the first assertion.
    #[test]
    fn a_cold_restart_is_down_then_busy() {
        let faults = parse(&["restart-cold:5@10,warmup=10,floor=0"]);
        let mut rng = SeededRng::new(2);
        assert_eq!(
            decide(s(12.0), &faults, &mut rng),
            Action::Fail { mode: FailMode::Refuse, by: "restart-cold" }
        );
        let refused = (0..100)
            .map(|_| decide(s(16.0), &faults, &mut rng))
            .find(|a| matches!(a, Action::Fail { .. }));
        assert_eq!(refused, Some(Action::Fail { mode: FailMode::Status, by: "restart-cold" }));
    }

    #[test]
    fn delays_follow_their_distribution() {
        let mut rng = SeededRng::new(11);
        let exp = Delay::Exponential(s(0.1));
        let mean =
            (0..20_000).map(|_| exp.sample(rng.next_f64()).as_secs_f64()).sum::<f64>() / 20_000.0;
        assert!((mean - 0.1).abs() < 0.005, "{mean}");
        assert_eq!(exp.sample(0.999_999_999), s(1.0)); // cut at 10× the mean
        assert_eq!(Delay::Fixed(s(0.2)).sample(0.7), s(0.2));
    }

    #[test]
    fn live_faults_are_bounded_and_clearable() {
        let faults = Faults::new(Vec::new());
        for i in 0..MAX_FAULTS {
            assert!(faults.add(parse(&["fail:100"])[0].shifted(s(i as f64)), s(0.0)));
        }
        assert!(!faults.add(parse(&["fail:1"])[0], s(0.0)));
        assert_eq!(faults.clear(), MAX_FAULTS);
        assert!(matches!(faults.decide(s(5.0), &mut SeededRng::new(1)), Action::Pass { .. }));
    }

    #[test]
    fn grammar_round_trips_and_rejects() {
        for f in [
            "fail:10@5,mode=reset",
            "hang:3@1,max=2",
            "slow:5@0,latency=200,jitter=50",
            "slow:5@0,latency=200,dist=exp",
            "restart-cold:5@2,warmup=20,floor=10",
            "bandwidth:9@0,rate=64",
            "fail:1@0,mode=503,pct=25",
            "fail:2@1,mode=refuse",
        ] {
            let a: Fault = f.parse().unwrap();
            assert_eq!(a.to_string().parse::<Fault>().unwrap(), a, "{f}");
        }
        for bad in [
            "",
            "fail",
            "fail:x",
            "fail:-1",
            "fail:1@inf",
            "boom:1",
            "fail:1,mode=x",
            "fail:1,mode=refuse,pct=50",
            "fail:1,pct=0",
            "fail:1,pct=101",
            "partial:5",
            "slow:1,latency=99999999",
            "bandwidth:1",
            "bandwidth:1,rate=0",
            "hang:1,latency=5",
            "fail:1,pct=5,pct=6",
            "fail:1,x",
            "slow:1,dist=exp,jitter=3",
        ] {
            assert!(bad.parse::<Fault>().is_err(), "{bad:?} parsed");
        }
        let long = format!("fail:1{}", ",pct=1".repeat(60));
        assert!(long.parse::<Fault>().is_err());
    }
}
