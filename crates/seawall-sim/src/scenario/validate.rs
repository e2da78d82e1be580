//! Range and consistency checks of a parsed scenario, so the engine never sees a NaN rate or a
//! fault on a tier that does not exist.

use super::schema::{Degrade, FaultKind, ScenarioFile, Servers, Service};
use crate::error::Error;

fn num(field: &str, v: f64, lo: f64, hi: f64) -> Result<(), Error> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err(Error::invalid(field, format!("a number in [{lo}, {hi}]"), shown(v)))
    }
}

/// `v` as a user would write it: `1e300`, not its 301 digits.
fn shown(v: f64) -> String {
    if v != 0.0 && !(1e-6..1e15).contains(&v.abs()) { format!("{v:e}") } else { v.to_string() }
}

fn service(field: &str, s: &Service) -> Result<(), Error> {
    num(&format!("{field}.mean_ms"), s.mean_ms, 0.0, 3_600_000.0)?;
    match (s.p50_ms, s.p99_ms) {
        (None, None) => Ok(()),
        (Some(p50), Some(p99)) => {
            num(&format!("{field}.p50_ms"), p50, 0.001, 3_600_000.0)?;
            num(&format!("{field}.p99_ms"), p99, p50, 3_600_000.0)
        }
        _ => Err(Error::invalid(field, "both p50_ms and p99_ms, or neither", "only one")),
    }
}

fn degrade(field: &str, d: &Degrade) -> Result<(), Error> {
    num(&format!("{field}.factor"), d.factor, 1.0, 1000.0)?;
    match (d.above_rps, d.above_in_system, d.full_in_system) {
        (Some(rps), None, None) => num(&format!("{field}.above_rps"), rps, 0.0, 1e9),
        (None, Some(n), full) => {
            num(&format!("{field}.above_in_system"), f64::from(n), 0.0, 1e9)?;
            match full {
                Some(m) if m <= n => Err(Error::invalid(
                    format!("{field}.full_in_system"),
                    format!("more than above_in_system ({n})"),
                    m,
                )),
                _ => Ok(()),
            }
        }
        (Some(_), Some(_), _) => {
            Err(Error::invalid(field, "one trigger: above_rps or above_in_system", "both"))
        }
        (Some(_), None, Some(_)) => Err(Error::invalid(
            format!("{field}.full_in_system"),
            "only with above_in_system",
            "above_rps",
        )),
        (None, None, _) => {
            Err(Error::invalid(field, "one trigger: above_rps or above_in_system", "neither"))
        }
    }
}

/// Instances of a client layer: each holds a whole policy, so the count is bounded.
pub(crate) const MAX_INSTANCES: u32 = 10_000;

fn instances(field: &str, n: u32) -> Result<(), Error> {
    if (1..=MAX_INSTANCES).contains(&n) {
        Ok(())
    } else {
        Err(Error::invalid(field, format!("an integer in [1, {MAX_INSTANCES}]"), n))
    }
}

/// Replicas of a tier's server.
pub(crate) const MAX_REPLICAS: u32 = 1_000;

/// Servers over all tiers: replicas, or instances with per-instance servers.
pub(crate) const MAX_SERVERS: u64 = 60_000;

/// Checks every number and name; the first problem is returned.
pub(super) fn check(s: &ScenarioFile) -> Result<(), Error> {
    num("duration_s", s.duration_s, 1.0, 86_400.0)?;
    let e = &s.edge;
    num("edge.rate", e.rate, 0.0, 10_000_000.0)?;
    num("edge.deadline_ms", e.deadline_ms, 1.0, 3_600_000.0)?;
    instances("edge.instances", e.instances)?;
    if let Some(t) = e.timeout_ms {
        num("edge.timeout_ms", t, 1.0, 3_600_000.0)?;
    }
    for (i, p) in e.ramp.iter().enumerate() {
        num(&format!("edge.ramp[{i}].at_s"), p.at_s, 0.0, s.duration_s)?;
        num(&format!("edge.ramp[{i}].rate"), p.rate, 0.0, 10_000_000.0)?;
        if i > 0 && p.at_s < e.ramp[i - 1].at_s {
            return Err(Error::invalid(format!("edge.ramp[{i}].at_s"), "increasing times", p.at_s));
        }
    }
    for (i, p) in e.spike.iter().enumerate() {
        num(&format!("edge.spike[{i}].start_s"), p.start_s, 0.0, s.duration_s)?;
        num(&format!("edge.spike[{i}].end_s"), p.end_s, p.start_s, s.duration_s)?;
        num(&format!("edge.spike[{i}].rate"), p.rate, 0.0, 10_000_000.0)?;
    }
    for (i, h) in e.herd.iter().enumerate() {
        num(&format!("edge.herd[{i}].at_s"), h.at_s, 0.0, s.duration_s)?;
        num(&format!("edge.herd[{i}].spread_s"), h.spread_s, 0.0, 86_400.0)?;
        if h.clients > 100_000_000 {
            return Err(Error::invalid(
                format!("edge.herd[{i}].clients"),
                "at most 1e8",
                h.clients,
            ));
        }
    }
    if let Some(r) = &e.refresh {
        num("edge.refresh.probability", r.probability, 0.0, 1.0)?;
        num("edge.refresh.delay_ms", r.delay_ms, 0.0, 3_600_000.0)?;
        num("edge.refresh.max", f64::from(r.max), 0.0, 100.0)?;
    }
    if s.tiers.is_empty() || s.tiers.len() > 16 {
        return Err(Error::invalid("tier", "1 to 16 [[tier]] tables", s.tiers.len()));
    }
    for (i, t) in s.tiers.iter().enumerate() {
        let f = format!("tier[{i}] ({})", t.name);
        if s.tiers[..i].iter().any(|o| o.name == t.name) {
            return Err(Error::invalid(format!("{f}.name"), "a unique tier name", &t.name));
        }
        num(&format!("{f}.workers"), f64::from(t.workers), 0.0, 1_000_000.0)?;
        num(&format!("{f}.queue_limit"), f64::from(t.queue_limit), 0.0, 100_000_000.0)?;
        service(&format!("{f}.service"), &t.service)?;
        if let Some(w) = t.contention_window_ms {
            num(&format!("{f}.contention_window_ms"), w, 0.0, 3_600_000.0)?;
        }
        if let Some(d) = &t.degrade {
            degrade(&format!("{f}.degrade"), d)?;
        }
        if let Some(calls) = &t.calls {
            for (k, name) in calls.iter().enumerate() {
                let later = &s.tiers[i + 1..];
                if !later.iter().any(|o| &o.name == name) {
                    let names: Vec<&str> = later.iter().map(|o| o.name.as_str()).collect();
                    let what = format!("a tier listed after this one, one of {names:?}");
                    return Err(Error::invalid(format!("{f}.calls[{k}]"), what, name));
                }
                if calls[..k].contains(name) {
                    return Err(Error::invalid(format!("{f}.calls[{k}]"), "no repeats", name));
                }
            }
        }
        if i > 0 && !(0..i).any(|c| s.calls_of(c).contains(&i)) {
            return Err(Error::invalid(
                format!("{f}.name"),
                "a tier some tier above calls (the others name it in `calls`)",
                &t.name,
            ));
        }
        // The bottom: a tier that calls nothing, so it has no client.
        let bottom = s.calls_of(i).is_empty();
        instances(&format!("{f}.instances"), t.instances)?;
        if !(1..=MAX_REPLICAS).contains(&t.replicas) {
            return Err(Error::invalid(
                format!("{f}.replicas"),
                format!("an integer in [1, {MAX_REPLICAS}]"),
                t.replicas,
            ));
        }
        if bottom && t.instances > 1 {
            return Err(Error::invalid(
                format!("{f}.instances"),
                "1 on a tier that calls nothing (it has no client; `replicas` gives it servers)",
                t.instances,
            ));
        }
        if t.servers == Servers::PerInstance && t.replicas > 1 {
            return Err(Error::invalid(
                format!("{f}.replicas"),
                "1 with servers = \"per-instance\" (each instance is a replica: set `instances`)",
                t.replicas,
            ));
        }
        match t.timeout_ms {
            Some(_) if bottom => {
                return Err(Error::invalid(
                    format!("{f}.timeout_ms"),
                    "no client timeout on a tier that calls nothing",
                    "a timeout",
                ));
            }
            Some(v) => num(&format!("{f}.timeout_ms"), v, 1.0, 3_600_000.0)?,
            None => {}
        }
    }
    // Every tier's servers are numbered together (16-bit ids in the engine).
    let servers: u64 = s.tiers.iter().map(|t| u64::from(t.server_count())).sum();
    if servers > MAX_SERVERS {
        return Err(Error::invalid(
            "tier",
            format!(
                "at most {MAX_SERVERS} servers over all tiers (replicas, or instances with \
                     servers = \"per-instance\")"
            ),
            servers,
        ));
    }
    for (i, c) in s.operator.iter().enumerate() {
        let f = format!("operator[{i}]");
        if !s.tiers.iter().any(|t| t.name == c.tier) {
            let names: Vec<&str> = s.tiers.iter().map(|t| t.name.as_str()).collect();
            return Err(Error::invalid(format!("{f}.tier"), format!("one of {names:?}"), &c.tier));
        }
        num(&format!("{f}.start_s"), c.start_s, 0.0, 86_400.0)?;
        num(&format!("{f}.duration_s"), c.duration_s, 0.0, 86_400.0)?;
        if c.admit_percent > 100 {
            return Err(Error::invalid(
                format!("{f}.admit_percent"),
                "in [0, 100]",
                c.admit_percent,
            ));
        }
    }
    for (i, fs) in s.faults.iter().enumerate() {
        let f = format!("fault[{i}]");
        let Some(tier) = s.tiers.iter().find(|t| t.name == fs.tier) else {
            let names: Vec<&str> = s.tiers.iter().map(|t| t.name.as_str()).collect();
            return Err(Error::invalid(format!("{f}.tier"), format!("one of {names:?}"), &fs.tier));
        };
        if let Some(r) = fs.replica
            && r >= tier.server_count()
        {
            let (n, what) = match tier.servers {
                Servers::Pool => (tier.replicas, "replicas"),
                Servers::PerInstance => (tier.instances, "instances, each with its server"),
            };
            return Err(Error::invalid(
                format!("{f}.replica"),
                format!("a replica index below {n} (tier {} has {n} {what})", tier.name),
                r,
            ));
        }
        // A fault after the end is allowed (a shortened `--duration`); it simply never fires.
        num(&format!("{f}.start_s"), fs.start_s, 0.0, 86_400.0)?;
        num(&format!("{f}.duration_s"), fs.duration_s, 0.0, 86_400.0)?;
        let need = |what: &str, v: Option<f64>, lo: f64, hi: f64| match v {
            Some(x) => num(&format!("{f}.{what}"), x, lo, hi),
            None => Err(Error::invalid(
                format!("{f}.{what}"),
                format!("set for a {:?} fault", fs.kind),
                "nothing",
            )),
        };
        match fs.kind {
            FaultKind::Outage => {}
            FaultKind::Latency => {
                need("p50_ms", fs.p50_ms, 0.001, 3_600_000.0)?;
                need("p99_ms", fs.p99_ms, fs.p50_ms.unwrap_or(0.0), 3_600_000.0)?;
            }
            FaultKind::Capacity => need("capacity", fs.capacity, 0.0, 1.0)?,
            FaultKind::Restart => need("cold_factor", fs.cold_factor, 1.0, 1000.0)?,
        }
    }
    for p in &s.default_policies {
        if !s.names().contains(p) {
            return Err(Error::invalid("default_policies", "preset or [policies.*] names", p));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A huge or tiny value out of range is quoted as the user would write it; printing the
    /// plain `f64` (`v` instead of `shown(v)`) turns this red with 301 digits.
    #[test]
    fn out_of_range_values_are_quoted_short() {
        let e = num("edge.rate", 1e300, 0.0, 1e7).unwrap_err().to_string();
        assert!(e.ends_with("got 1e300"), "{e}");
        let e = num("edge.rate", -1e-9, 0.0, 1e7).unwrap_err().to_string();
        assert!(e.ends_with("got -1e-9"), "{e}");
        let e = num("edge.rate", -5.0, 0.0, 1e7).unwrap_err().to_string();
        assert!(e.ends_with("got -5"), "{e}");
        let e = num("edge.rate", f64::NAN, 0.0, 1e7).unwrap_err().to_string();
        assert!(e.ends_with("got NaN"), "{e}");
    }
}
