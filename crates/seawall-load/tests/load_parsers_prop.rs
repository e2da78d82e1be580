//! Property tests of `seawall load`'s parsers of untrusted text: the URL (`Target::parse`),
//! `--header 'Name: value'`, durations (`--duration`, the ramp's stages), `--ramp
//! DURATION:RATE` and the schedule they build. On any input they return, never panic; valid
//! inputs parse to the values written; values out of range are refused with the error kind that
//! names them. URLs are generated with IP literals only, so that no case asks a resolver.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use proptest::prelude::*;
use seawall_load::schedule::{MAX_DURATION, MAX_RATE};
use seawall_load::{
    LoadErrorKind, Schedule, Stage, Target, parse_duration, parse_header, parse_stage,
};

/// Text made of the grammars' own characters, so that it gets past the first split often.
fn grammar_text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-zA-Z0-9:.\\-_ +e]{0,24}").unwrap()
}

fn ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|o| IpAddr::V4(Ipv4Addr::from(o))),
        (1u8..=255, any::<[u8; 4]>())
            .prop_map(|(a, o)| IpAddr::V4(Ipv4Addr::new(127, a, o[0], o[1]))),
        any::<u128>().prop_map(|v| IpAddr::V6(Ipv6Addr::from(v))),
        Just(IpAddr::V6(Ipv6Addr::LOCALHOST)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_parser_panics(s in any::<String>(), g in grammar_text(), tail in "[ -~]{0,40}") {
        for s in [&s, &g] {
            let _ = parse_duration(s);
            let _ = parse_header(s);
            let _ = parse_stage(s);
        }
        // Anything after a loopback literal: port, path, query, garbage; no name to resolve.
        let _ = Target::parse(&format!("http://127.0.0.1{tail}"));
        let _ = Target::parse(&format!("http://[::1]{tail}"));
    }

    #[test]
    fn durations_parse_to_the_value_written(ms in 1u64..=600_000, unit in 0..4usize) {
        let (text, want) = match unit {
            0 => (format!("{ms}ms"), Duration::from_millis(ms)),
            1 => (format!(" {}s ", ms as f64 / 1000.0), Duration::from_millis(ms)),
            2 => (format!("{}", ms as f64 / 1000.0), Duration::from_millis(ms)),
            _ => (format!("{}m", ms / 60_000 + 1), Duration::from_secs((ms / 60_000 + 1) * 60)),
        };
        let got = parse_duration(&text);
        if want > MAX_DURATION {
            prop_assert_eq!(got.unwrap_err().kind(), LoadErrorKind::Duration);
        } else {
            let got = got.unwrap();
            // Within a nanosecond: a decimal number of seconds goes through an f64.
            prop_assert!(got.abs_diff(want) <= Duration::from_nanos(1), "{:?} -> {:?}", text, got);
        }
    }

    #[test]
    fn durations_out_of_range_are_refused(over in 0.001f64..1e12, neg in any::<bool>()) {
        let v = if neg { -over } else { MAX_DURATION.as_secs_f64() + over };
        prop_assert_eq!(parse_duration(&format!("{v}s")).unwrap_err().kind(), LoadErrorKind::Duration);
        for s in ["0", "0ms", "NaN", "inf", "-0s", ""] {
            prop_assert_eq!(parse_duration(s).unwrap_err().kind(), LoadErrorKind::Duration, "{}", s);
        }
    }

    #[test]
    fn headers_parse_to_the_name_and_trimmed_value(
        name in "[A-Za-z][A-Za-z0-9-]{0,30}", value in "[!-~]([ -~]{0,60}[!-~])?",
        pad in "[ ]{0,3}",
    ) {
        let h = parse_header(&format!("{name}:{pad}{value}{pad}"));
        let own = ["request-timeout-ms", "request-attempt", "content-length", "transfer-encoding"];
        if own.contains(&name.to_ascii_lowercase().as_str()) {
            prop_assert_eq!(h.unwrap_err().kind(), LoadErrorKind::Header);
        } else {
            let (n, v) = h.unwrap();
            prop_assert_eq!(n.as_str(), name.to_ascii_lowercase());
            prop_assert_eq!(v.to_str().unwrap(), value);
        }
    }

    #[test]
    fn the_generators_own_headers_cannot_be_set(k in 0..4usize, upper in any::<bool>(), v in "[a-z0-9]{1,8}") {
        let name = ["Request-Timeout-Ms", "Request-Attempt", "Content-Length", "Transfer-Encoding"][k];
        let name = if upper { name.to_ascii_uppercase() } else { name.to_owned() };
        prop_assert_eq!(parse_header(&format!("{name}: {v}")).unwrap_err().kind(), LoadErrorKind::Header);
    }

    #[test]
    fn stages_parse_and_schedules_check_their_rates(
        ms in 1u64..=600_000, rate in 0.0f64..=1e6, start in any::<f64>(), bad in any::<f64>(),
    ) {
        let stage = parse_stage(&format!("{ms}ms:{rate}")).unwrap();
        prop_assert_eq!(stage, Stage { duration: Duration::from_millis(ms), target: rate });
        // Any start rate: refused unless finite and in [0, MAX_RATE]; never a panic.
        let ok = start.is_finite() && (0.0..=MAX_RATE).contains(&start);
        let s = Schedule::ramp(start, vec![stage]);
        if !ok {
            prop_assert_eq!(s.unwrap_err().kind(), LoadErrorKind::Rate);
        } else if start > 0.0 || rate > 0.0 {
            prop_assert!(s.is_ok());
        }
        // A stage's rate out of range is refused by the schedule, whatever the parser let by.
        if !(bad.is_finite() && (0.0..=MAX_RATE).contains(&bad)) {
            let s = Schedule::ramp(1.0, vec![Stage { duration: Duration::from_secs(1), target: bad }]);
            prop_assert_eq!(s.unwrap_err().kind(), LoadErrorKind::Rate);
        }
    }

    #[test]
    fn a_ramp_lasts_at_most_the_maximum(n in 1usize..8, secs in 1u64..=600) {
        let stages = vec![Stage { duration: Duration::from_secs(secs), target: 10.0 }; n];
        let s = Schedule::ramp(0.0, stages);
        if Duration::from_secs(secs * n as u64) > MAX_DURATION {
            prop_assert_eq!(s.unwrap_err().kind(), LoadErrorKind::Duration);
        } else {
            prop_assert!(s.is_ok());
        }
    }

    #[test]
    fn only_loopback_targets_are_accepted(ip in ip(), port in 1u16.., path in "(/[a-z0-9._~-]{0,12}){0,3}") {
        let host = match ip {
            IpAddr::V4(a) => a.to_string(),
            IpAddr::V6(a) => format!("[{a}]"),
        };
        let url = format!("http://{host}:{port}{path}");
        let t = Target::parse(&url);
        if ip.is_loopback() {
            let t = t.unwrap();
            prop_assert_eq!((t.addr.ip(), t.addr.port()), (ip, port));
            let want = if path.is_empty() { "/" } else { path.as_str() };
            prop_assert_eq!(t.path.to_string(), want);
            prop_assert_eq!(t.host.to_str().unwrap(), format!("{host}:{port}"));
        } else {
            prop_assert_eq!(t.unwrap_err().kind(), LoadErrorKind::NotLoopback);
        }
    }
}
