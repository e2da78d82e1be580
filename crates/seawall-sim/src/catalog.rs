//! The built-in scenarios, embedded from `scenarios/*.toml`. Each file describes its incident and
//! says where its numbers come from (a paper where one exists, otherwise the numbers themselves);
//! `SCENARIOS.md` lists them.

/// One built-in scenario.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// Name (`bronson`).
    pub name: &'static str,
    /// The TOML text.
    pub text: &'static str,
}

macro_rules! entries {
    ($($name:literal),* $(,)?) => {
        /// Every built-in scenario; the first is the default.
        pub const CATALOG: &[Entry] = &[
            $(Entry { name: $name, text: include_str!(concat!("../scenarios/", $name, ".toml")) }),*
        ];
    };
}

entries!(
    "bronson",
    "index-slowdown",
    "auth-gc-pause",
    "layered",
    "layered-64",
    "layered-243",
    "verify",
    "tatkal",
    "reconnect-herd",
    "traffic-spike",
    "fleet",
    "huang-retry",
);

/// The default scenario's name.
pub const DEFAULT: &str = "bronson";

/// A built-in scenario by name.
pub fn get(name: &str) -> Option<Entry> {
    CATALOG.iter().copied().find(|e| e.name == name)
}

/// Names of every built-in scenario.
pub fn names() -> Vec<String> {
    CATALOG.iter().map(|e| e.name.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scenario;

    #[test]
    fn every_entry_parses_and_names_itself() {
        for e in CATALOG {
            let s = Scenario::parse(e.name, e.text, &[]).unwrap_or_else(|err| panic!("{err}"));
            assert_eq!(s.name, e.name);
            for p in &s.default_policies {
                s.policy(p).unwrap();
            }
        }
    }
}
