//! Scenario files (seawall-sim's TOML schema, validation and `--set` overrides): never panic;
//! a scenario that parses resolves every policy it names and a sane fault window.
//!
//! Lines of the form `#set KEY=VALUE` (TOML comments, so the file stays valid) are also passed
//! as `--set` overrides, so the override path is fuzzed with the file it applies to.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall_sim::Scenario;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let sets: Vec<String> =
        text.lines().filter_map(|l| l.strip_prefix("#set ")).map(str::to_string).take(8).collect();
    let Ok(scenario) = Scenario::parse("fuzz.toml", text, &sets) else { return };
    for name in scenario.policy_names() {
        // `parse` resolved every policy the file defines; the presets resolve too.
        scenario.policy(&name).unwrap_or_else(|e| panic!("policy {name:?} does not resolve: {e}"));
    }
    if let Some((start, end)) = scenario.fault_window() {
        assert!(start.is_finite() && end.is_finite() && start <= end, "{start} .. {end}");
    }
});
