//! Scenarios: the TOML schema, strict loading with `--set` overrides, and validation.
//!
//! Two types, one on each side of the boundary: [`ScenarioFile`] is the file as written (parsed
//! strictly, or built in code by a generator and written with [`ScenarioFile::to_toml`]), and
//! [`Scenario`] is a file that passed every check, the only thing the simulator runs. A
//! `Scenario` reads like its file (it dereferences to it) but cannot be changed without being
//! checked again.

mod overrides;
mod schema;
mod validate;

/// The `[policies.NAME]` tables (defined with the policies, re-exported where the file is read).
pub use crate::policy::{
    BackoffKind, BudgetKind, ClientOverride, PolicyOverride, ServerLimit, ServerSlot,
};
pub use schema::*;

use serde::Serialize;

use crate::error::Error;
use crate::policy::{PRESETS, PolicySpec, Preset};

/// A validated scenario: every number in range, every name resolving, every policy building
/// through the core's constructors.
///
/// Built by [`Scenario::parse`] from TOML text or by [`Scenario::new`] from a [`ScenarioFile`]
/// made in code; it serializes as its file.
///
/// ```
/// use seawall_sim::Scenario;
///
/// let entry = seawall_sim::catalog::get("bronson").unwrap();
/// let s = Scenario::parse(entry.name, entry.text, &[]).unwrap();
/// let mut file = s.as_file().clone();
/// file.edge.rate = 140.0;
/// let faster = Scenario::new(file.clone()).unwrap();
/// assert_eq!(faster.edge.rate, 140.0);
/// // Written and read back, it is the same scenario.
/// let text = faster.to_toml().unwrap();
/// assert_eq!(Scenario::parse("again.toml", &text, &[]).unwrap(), faster);
/// // A value out of range does not validate.
/// file.edge.rate = -1.0;
/// assert!(Scenario::new(file).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Scenario {
    file: ScenarioFile,
}

impl std::ops::Deref for Scenario {
    type Target = ScenarioFile;

    fn deref(&self) -> &ScenarioFile {
        &self.file
    }
}

impl TryFrom<ScenarioFile> for Scenario {
    type Error = Error;

    fn try_from(file: ScenarioFile) -> Result<Scenario, Error> {
        Scenario::new(file)
    }
}

impl ScenarioFile {
    /// The tiers tier `i` calls, by index. In a file where no tier names its `calls`, each
    /// calls the next (a chain); once one does, the calls are explicit and a tier without
    /// `calls` calls nothing. Validation has checked that every name exists and comes later.
    pub fn calls_of(&self, i: usize) -> Vec<usize> {
        let chain = self.tiers.iter().all(|t| t.calls.is_none());
        match &self.tiers[i].calls {
            None if chain && i + 1 < self.tiers.len() => vec![i + 1],
            None => Vec::new(),
            Some(names) => {
                names.iter().filter_map(|n| self.tiers.iter().position(|t| &t.name == n)).collect()
            }
        }
    }

    /// The file as TOML text, in the schema [`Scenario::parse`] reads.
    ///
    /// Fails only on what TOML cannot hold (a herd of more than `i64::MAX` clients), which a
    /// validated [`Scenario`] never has.
    pub fn to_toml(&self) -> Result<String, Error> {
        toml::to_string(self).map_err(|e| Error::Serialize { message: e.to_string() })
    }

    /// Names of the presets, then this file's own policies.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = PRESETS.iter().map(|s| s.to_string()).collect();
        for k in self.policies.keys() {
            if !v.contains(k) {
                v.push(k.clone());
            }
        }
        v
    }
}

impl Scenario {
    /// Parses `text` (named `file` in errors), applies `--set KEY=VALUE` overrides in order, and
    /// validates the result.
    ///
    /// ```
    /// let s = seawall_sim::Scenario::parse(
    ///     "x.toml",
    ///     seawall_sim::catalog::get("bronson").unwrap().text,
    ///     &["edge.rate=140".to_string()],
    /// ).unwrap();
    /// assert_eq!(s.edge.rate, 140.0);
    /// ```
    pub fn parse(file: &str, text: &str, sets: &[String]) -> Result<Scenario, Error> {
        let raw: ScenarioFile = toml::from_str(text).map_err(|e| parse_error(file, text, &e))?;
        let raw = if sets.is_empty() {
            raw
        } else {
            let mut table: toml::Table =
                toml::from_str(text).map_err(|e| parse_error(file, text, &e))?;
            for s in sets {
                overrides::apply(&mut table, s)?;
            }
            toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| Error::Override {
                given: sets.join(" "),
                message: e.message().to_string(),
            })?
        };
        Scenario::new(raw).map_err(|e| e.in_file(file))
    }

    /// Validates a scenario built in code (or deserialized by other means): the same checks as
    /// [`Scenario::parse`], with errors naming the field path.
    pub fn new(file: ScenarioFile) -> Result<Scenario, Error> {
        validate::check(&file)?;
        let scenario = Scenario { file };
        for (name, o) in &scenario.policies {
            scenario.resolve_one(name, o)?;
        }
        Ok(scenario)
    }

    /// The file this scenario was validated from.
    pub fn as_file(&self) -> &ScenarioFile {
        &self.file
    }

    /// The file, to change and validate again.
    pub fn into_file(self) -> ScenarioFile {
        self.file
    }

    /// The scenario as TOML text (see [`ScenarioFile::to_toml`]).
    pub fn to_toml(&self) -> Result<String, Error> {
        self.file.to_toml()
    }

    /// Names of the policies this scenario can run: the presets, then its own.
    pub fn policy_names(&self) -> Vec<String> {
        self.file.names()
    }

    fn resolve_one(&self, name: &str, o: &PolicyOverride) -> Result<PolicySpec, Error> {
        let base = o.base.or_else(|| Preset::from_name(name)).ok_or_else(|| {
            Error::invalid(format!("policies.{name}.base"), format!("one of {PRESETS:?}"), name)
        })?;
        let mut spec = PolicySpec::of(base);
        spec.name = name.to_string();
        let spec = spec.apply(o, &format!("policies.{name}"))?;
        self.check_clients(name, &spec)?;
        Ok(spec)
    }

    /// Checks a policy's per-layer client settings: each names a tier that calls another, and
    /// builds through the core's constructors.
    fn check_clients(&self, name: &str, spec: &PolicySpec) -> Result<(), Error> {
        let field = format!("policies.{name}");
        if let Some(c) = &spec.edge_client {
            spec.for_client(Some(c), self.edge.timeout_ms, &format!("{field}.edge"))?;
        }
        let callers: Vec<&Tier> = (0..self.tiers.len())
            .filter(|&i| !self.calls_of(i).is_empty())
            .map(|i| &self.tiers[i])
            .collect();
        for (tier, c) in &spec.tier_clients {
            let f = format!("{field}.tier.{tier}");
            let Some(t) = callers.iter().find(|t| &t.name == tier) else {
                let names: Vec<&str> = callers.iter().map(|t| t.name.as_str()).collect();
                let what = format!("a tier that calls another, one of {names:?}");
                return Err(Error::invalid(f, what, tier));
            };
            spec.for_client(Some(c), t.timeout_ms, &f)?;
        }
        Ok(())
    }

    /// The policy called `name`: the scenario's own definition (over its base preset) if it has
    /// one, else the preset.
    pub fn policy(&self, name: &str) -> Result<PolicySpec, Error> {
        match self.policies.get(name) {
            Some(o) => self.resolve_one(name, o),
            None => PolicySpec::preset(name).ok_or_else(|| Error::UnknownPolicy {
                name: name.into(),
                known: self.policy_names(),
            }),
        }
    }

    /// The fault window shown in reports: from the first fault's start to the last one's end,
    /// over the faults that start within the run (a shortened `--duration` may cut some off).
    pub fn fault_window(&self) -> Option<(f64, f64)> {
        let within = || self.faults.iter().filter(|f| f.start_s < self.duration_s);
        let start = within().map(|f| f.start_s).reduce(f64::min)?;
        let end = within().map(|f| f.start_s + f.duration_s).reduce(f64::max)?;
        Some((start, end))
    }
}

fn parse_error(file: &str, text: &str, e: &toml::de::Error) -> Error {
    // Counted in bytes: a span that is not on a character boundary cannot panic here.
    let line = e.span().map(|s| {
        text.as_bytes()[..s.start.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
    });
    Error::Parse { file: file.to_string(), line, message: e.message().trim().to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINI: &str = r#"
name = "mini"
description = "d"
duration_s = 10
[edge]
rate = 10
deadline_ms = 1000
[[tier]]
name = "db"
workers = 2
service = { mean_ms = 5 }
"#;

    #[test]
    fn an_endless_scenario_file_is_refused() {
        let e = crate::load("/dev/zero", &[]).unwrap_err().to_string();
        assert!(e.contains("larger than 1 MiB"), "{e}");
    }

    #[test]
    fn a_syntax_error_after_multibyte_text_names_its_line() {
        let text = format!("{MINI}# é → ü\n[edge\n");
        let e = Scenario::parse("m.toml", &text, &[]).unwrap_err();
        assert!(matches!(e, Error::Parse { line: Some(l), .. } if l > 10), "{e:?}");
    }

    #[test]
    fn a_minimal_file_loads() {
        let s = Scenario::parse("m.toml", MINI, &[]).unwrap();
        assert_eq!(s.tiers.len(), 1);
        assert_eq!(s.default_policies, ["naive", "seawall"]);
    }

    #[test]
    fn unknown_fields_name_file_and_line() {
        let bad = MINI.replace("workers = 2", "wrokers = 2");
        let e = Scenario::parse("m.toml", &bad, &[]).unwrap_err();
        let Error::Parse { file, line, message } = &e else { panic!("{e}") };
        assert_eq!((file.as_str(), *line), ("m.toml", Some(10)));
        assert!(message.contains("wrokers"), "{message}");
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let bad = MINI.replace("rate = 10", "rate = -1");
        let e = Scenario::parse("m.toml", &bad, &[]).unwrap_err().to_string();
        assert!(e.contains("m.toml: edge.rate"), "{e}");
    }

    #[test]
    fn sets_are_validated_like_the_file() {
        let s = Scenario::parse("m.toml", MINI, &["tier.db.workers=7".into()]).unwrap();
        assert_eq!(s.tiers[0].workers, 7);
        assert!(Scenario::parse("m.toml", MINI, &["edge.rtae=1".into()]).is_err());
        assert!(Scenario::parse("m.toml", MINI, &["edge.rate=fast".into()]).is_err());
        assert!(Scenario::parse("m.toml", MINI, &["edge.rate=-5".into()]).is_err());
        let w = |v: &str| {
            Scenario::parse("m.toml", MINI, &[format!("tier.db.contention_window_ms={v}")])
        };
        assert_eq!(w("20").unwrap().tiers[0].contention_window_ms, Some(20.0));
        let e = w("-1").unwrap_err().to_string();
        assert!(e.contains("contention_window_ms"), "{e}");
        let hedge = |v: &str| {
            Scenario::parse("m.toml", MINI, &[format!("policies.naive.hedge_max_attempts={v}")])
        };
        assert!(hedge("3").is_ok());
        let e = hedge("9").unwrap_err().to_string();
        assert!(e.contains("policies.naive.hedge_max_attempts"), "{e}");
    }

    #[test]
    fn a_policy_base_is_a_preset_by_name() {
        let ok = format!("{MINI}[policies.mine]\nbase = \"exponential\"\nattempts = 2\n");
        let s = Scenario::parse("m.toml", &ok, &[]).unwrap();
        assert_eq!(s.policies["mine"].base, Some(Preset::Exponential));
        assert_eq!(s.policy("mine").unwrap().backoff, BackoffKind::Exponential);
        let bad = ok.replace("exponential", "expo");
        let e = Scenario::parse("m.toml", &bad, &[]).unwrap_err();
        assert!(matches!(&e, Error::Parse { line: Some(13), .. }), "{e:?}");
        // Without a base, the policy's name must be a preset's.
        let nameless = format!("{MINI}[policies.mine]\nattempts = 2\n");
        let e = Scenario::parse("m.toml", &nameless, &[]).unwrap_err().to_string();
        assert!(e.contains("policies.mine.base"), "{e}");
        for p in Preset::ALL {
            assert_eq!(Preset::from_name(p.as_str()), Some(p));
            assert_eq!(PolicySpec::preset(p.as_str()).unwrap().name, p.as_str());
        }
    }

    #[test]
    fn unknown_policy_lists_the_known_ones() {
        let s = Scenario::parse("m.toml", MINI, &[]).unwrap();
        let e = s.policy("nope").unwrap_err().to_string();
        assert!(e.contains("seawall"), "{e}");
    }
}
