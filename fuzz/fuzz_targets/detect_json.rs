//! detect's JSON replay input (a `results.json` of `seawall simulate` / `seawall lab`): never
//! panic; what parses serializes back to JSON that parses to equal results; every run replays
//! through the classifier.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall_detect::{Classifier, Thresholds, replay, samples_from_run};
use seawall_report::Results;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(results) = serde_json::from_str::<Results>(text) else { return };
    let printed = results.to_json();
    let again: Results = serde_json::from_str(&printed)
        .unwrap_or_else(|e| panic!("{printed:?} does not parse back: {e}"));
    assert_eq!(again, results, "round trip through {printed:?}");
    for run in &results.runs {
        let run = replay(&results, Some(&run.policy)).expect("a listed run replays");
        let mut c = Classifier::new(Thresholds::default());
        if let Some(f) = &results.fault {
            c.set_trigger_end(f.end_s);
        }
        for s in samples_from_run(run) {
            let _ = c.push(s);
        }
    }
});
