//! The AWS shared config (INI) importer of seawall-audit: never panic, and every layer it
//! returns is at least one attempt.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use seawall_audit::import::{Select, aws};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Once with nothing selected (the importer takes the worst candidate), once naming a
    // candidate the corpus files use.
    common::durations(text);
    for select in [Select::default(), common::select()] {
        if let Ok(layers) = aws::parse(Path::new("fuzz.in"), text, &select) {
            common::check(&layers);
        }
    }
});

#[path = "common/import.rs"]
mod common;
