//! A deterministic discrete-event simulator of retry storms that runs the real `seawall` policy
//! code.
//!
//! # Why simulate the code users ship
//!
//! A retry storm is a property of a whole fleet: thousands of clients, each doing something
//! sensible, together offering a multiple of normal load to a dependency that is already sick.
//! Nobody can run that experiment on production, and a model that re-implements retry logic
//! answers a question about the model. So every client decision here — attempt or not, wait how
//! long, give up why — is made by [`seawall::policy::RetryPolicy`], driven by virtual time and a
//! seeded random stream. The simulator only moves requests through queues.
//!
//! # Model
//!
//! Open-loop edge arrivals (Poisson at a rate that can ramp or spike, plus herds) call a chain of
//! tiers. Each tier is a server (workers, FIFO queue with a bound, service time that can degrade
//! above a load threshold) and a client of the next tier (per-attempt timeout and a policy).
//! Faults hold or fail requests, inject latency, remove capacity, or restart a tier into cold
//! caches. See `SCENARIOS.md` for the file format and the catalog.
//!
//! ```
//! use seawall_sim::{Scenario, catalog, simulate};
//!
//! let entry = catalog::get("layered").unwrap();
//! let scenario = Scenario::parse(entry.name, entry.text, &[]).unwrap();
//! let results = simulate(&scenario, &["naive".into()], 7, &mut |_, _| {}).unwrap();
//! assert_eq!(results.runs[0].peak_amplification, 27.0); // 3 × 3 × 3 at the database
//! ```
#![warn(missing_docs)]

pub mod catalog;
mod engine;
pub mod error;
pub mod policy;
mod run;
pub mod scenario;
pub mod sweep;

pub use engine::{Door, DoorEvent, EngineStats};
pub use error::Error;
pub use policy::PolicySpec;
pub use run::{door_trace, run_policy, simulate};
pub use scenario::Scenario;

/// Loads a scenario by catalog name or file path, applying `--set` overrides.
pub fn load(name_or_path: &str, sets: &[String]) -> Result<Scenario, Error> {
    let (file, text) = source(name_or_path)?;
    Scenario::parse(&file, &text, sets)
}

/// The largest scenario file read, 1 MiB (the catalog's largest is a few KiB): a path naming a
/// huge or endless file (`/dev/zero`) is refused instead of read into memory.
const MAX_SCENARIO_BYTES: u64 = 1 << 20;

fn read_bounded(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?.take(MAX_SCENARIO_BYTES + 1).read_to_string(&mut text)?;
    Ok(text)
}

/// A scenario's file name (for errors) and TOML text, by catalog name or file path.
pub(crate) fn source(name_or_path: &str) -> Result<(String, String), Error> {
    if let Some(e) = catalog::get(name_or_path) {
        return Ok((format!("{}.toml", e.name), e.text.to_string()));
    }
    let path = std::path::Path::new(name_or_path);
    match read_bounded(path) {
        Ok(text) if text.len() as u64 > MAX_SCENARIO_BYTES => Err(Error::Parse {
            file: name_or_path.into(),
            line: None,
            message: format!("larger than {} MiB; not a scenario", MAX_SCENARIO_BYTES >> 20),
        }),
        Ok(text) => Ok((name_or_path.to_string(), text)),
        Err(_) if !name_or_path.ends_with(".toml") && !path.exists() => {
            Err(Error::UnknownScenario { name: name_or_path.into(), known: catalog::names() })
        }
        Err(e) => {
            Err(Error::Parse { file: name_or_path.into(), line: None, message: e.to_string() })
        }
    }
}
