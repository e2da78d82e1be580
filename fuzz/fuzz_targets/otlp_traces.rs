//! detect's span input (OTLP/HTTP protobuf and JSON bodies, Jaeger JSON files): never panic,
//! keep within the limits, and every parsed set of spans analyses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall_detect::traces::{Analysis, Limits, parse_any, parse_jaeger_json, parse_otlp_json, parse_otlp_protobuf};

fuzz_target!(|data: &[u8]| {
    let limits = Limits { max_bytes: 1 << 16, max_spans: 500 };
    for parsed in [
        parse_otlp_protobuf(data, limits),
        parse_otlp_json(data, limits),
        parse_jaeger_json(data, limits),
        parse_any(data, limits),
    ]
    .into_iter()
    .flatten()
    {
        assert!(parsed.spans.len() <= limits.max_spans);
        for s in &parsed.spans {
            assert!(s.end_ns >= s.start_ns);
        }
        let a = Analysis::of(&parsed.spans, 1.0, None);
        assert!(a.signals.wasted_s <= a.signals.server_s + 1e-9);
    }
});
