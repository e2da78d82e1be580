//! Property tests of the lab's parsers of untrusted text: `--proxy NAME=LISTEN,UPSTREAM[,MODE]`,
//! `--fault NAME:KIND:SECONDS[@START][,KEY=VALUE…]` (and the synthetic lab's `KIND:SECONDS`),
//! `--config NAME[=COMMAND]` and the lab file. On any input they return, never panic; valid
//! inputs parse to the values written (or round-trip through `Display`); values out of range
//! are refused with an error that names the flag and the field.

use std::time::Duration;

use proptest::prelude::*;
use seawall_lab::FaultSpec;
use seawall_lab::target::TargetParams;
use seawall_proxy::fault::{MAX_LATENCY_MS, MAX_SECONDS};
use seawall_proxy::{Delay, FailMode, Fault, FaultKind, Mode};

fn params() -> TargetParams {
    TargetParams::new("http://127.0.0.1:8080/checkout").unwrap()
}

/// Text made of the grammars' own characters, so that it gets past the first split often.
fn grammar_text() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-z0-9:@,=.%\\-_ ]{0,40}").unwrap()
}

fn name() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[A-Za-z0-9_-]{1,32}").unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_parser_panics(s in any::<String>(), g in grammar_text()) {
        for s in [&s, &g] {
            let _ = s.parse::<Fault>();
            let _ = s.parse::<FaultSpec>();
            let mut p = params();
            let _ = p.add_proxy(s);
            let _ = p.add_config(s);
            let _ = p.add_proxy("db=127.0.0.1:7000,127.0.0.1:5432");
            let _ = p.add_fault(&format!("db:{s}"));
            let _ = p.add_fault(s);
            let _ = TargetParams::from_json(s);
            let _ = TargetParams::from_json(&format!(r#"{{"target":"http://127.0.0.1:1/","faults":[{s:?}]}}"#));
        }
    }

    #[test]
    fn lab_files_never_panic(
        rate in any::<f64>(), dur in any::<f64>(), at in any::<f64>(), ready in any::<f64>(),
        deadline in any::<u64>(), in_flight in any::<usize>(), seed in any::<u64>(),
    ) {
        // serde_json writes non-finite floats as null, which the file refuses as a type error.
        let json = serde_json::json!({
            "target": "http://127.0.0.1:1/", "rate": rate, "duration_s": dur, "at_s": at,
            "ready_timeout_s": ready, "deadline_ms": deadline, "max_in_flight": in_flight,
            "seed": seed,
        });
        let _ = TargetParams::from_json(&json.to_string());
    }

    #[test]
    fn proxies_parse_to_what_was_written(
        n in name(), listen in 1u16.., upstream in 1u16.., mode in 0..3usize,
    ) {
        let suffix = ["", ",http", ",tcp"][mode];
        let mut p = params();
        p.add_proxy(&format!("{n}=127.0.0.1:{listen},127.0.0.1:{upstream}{suffix}")).unwrap();
        let c = &p.proxies[0];
        prop_assert_eq!(&c.name, &n);
        prop_assert_eq!(c.config.listen.port(), listen);
        prop_assert_eq!(c.config.upstream.port(), upstream);
        prop_assert_eq!(c.config.mode, if mode == 2 { Mode::Tcp } else { Mode::Http });
        // The same name twice, or a listen port 0, is refused, naming the flag.
        let e = p.add_proxy(&format!("{n}=127.0.0.1:{listen},127.0.0.1:{upstream}")).unwrap_err();
        prop_assert!(e.to_string().starts_with("--proxy") && e.to_string().contains("twice"));
        let e = params().add_proxy(&format!("{n}=127.0.0.1:0,127.0.0.1:{upstream}")).unwrap_err();
        prop_assert!(e.to_string().starts_with("--proxy"), "{}", e);
    }

    #[test]
    fn non_loopback_upstreams_are_refused(n in name(), a in 0u8..=255, port in 1u16..) {
        prop_assume!(a != 127);
        let e = params().add_proxy(&format!("{n}=127.0.0.1:7000,{a}.1.2.3:{port}")).unwrap_err();
        prop_assert!(e.to_string().starts_with("--proxy") && e.to_string().contains("loopback"));
    }

    #[test]
    fn configs_parse_to_what_was_written(n in name(), cmd in "[ -~]{0,80}") {
        let mut p = params();
        p.add_config(&format!("{n}={cmd}")).or_else(|e| {
            // Only an empty (after trimming) command is refused.
            prop_assert!(cmd.trim().is_empty(), "{}", e);
            prop_assert!(e.to_string().starts_with("--config") && e.to_string().contains("command"));
            Ok(())
        })?;
        if let Some(c) = p.configs.first() {
            prop_assert_eq!(&c.name, &n);
            prop_assert_eq!(c.command.as_deref(), Some(cmd.trim()));
        }
        let mut p = params();
        p.add_config(&n).unwrap();
        prop_assert_eq!(p.configs[0].command.as_deref(), None);
        let long = format!("{n}={}", "x".repeat(4097));
        let e = params().add_config(&long).unwrap_err().to_string();
        prop_assert!(e.starts_with("--config") && e.contains("4096"), "{}", e);
    }

    #[test]
    fn faults_round_trip_through_display(
        kind in 0..4usize, dur_ms in 0u64..=86_400_000, start_ms in 0u64..=86_400_000,
        latency in 0..=MAX_LATENCY_MS, pct in 1u32..=100,
    ) {
        let (dur, start) = (dur_ms as f64 / 1000.0, start_ms as f64 / 1000.0);
        let spec = match kind {
            0 => format!("fail:{dur}@{start}"),
            1 => format!("slow:{dur}@{start},latency={latency}"),
            2 => format!("hang:{dur}@{start},max={}", latency / 1000),
            _ => format!("partial:{dur}@{start},pct={pct}"),
        };
        let f: Fault = spec.parse().unwrap();
        prop_assert_eq!(f.duration, Duration::from_millis(dur_ms));
        prop_assert_eq!(f.start, Duration::from_millis(start_ms));
        match (kind, f.kind) {
            (0, FaultKind::Fail(_)) | (2, FaultKind::Hang { .. }) => {}
            (1, FaultKind::Slow(Delay::Fixed(d))) => prop_assert_eq!(d, Duration::from_millis(latency)),
            (3, FaultKind::Fail(_)) => prop_assert_eq!(f.percent, f64::from(pct)),
            (k, got) => prop_assert!(false, "kind {} parsed as {:?}", k, got),
        }
        let again: Fault = f.to_string().parse().unwrap();
        prop_assert_eq!(again, f);
    }

    #[test]
    fn every_kind_and_option_round_trips(
        kind in 0..8usize, dur_ms in 0u64..=86_400_000, start_ms in 0u64..=86_400_000,
        latency in 0..=MAX_LATENCY_MS, jitter in 0..=MAX_LATENCY_MS, pct in 1u32..=99,
        warmup_ms in 0u64..=86_400_000, floor in 0u32..=1000, kb in 1u64..=10_000_000,
    ) {
        // The kinds and keys the test above leaves out: fail's modes, slow's distributions,
        // restart-cold's warm-up and floor, bandwidth's rate, and pct on a kind other than fail.
        let (dur, start) = (dur_ms as f64 / 1000.0, start_ms as f64 / 1000.0);
        let (warmup, floor) = (warmup_ms as f64 / 1000.0, f64::from(floor) / 10.0);
        let spec = match kind {
            0 => format!("fail:{dur}@{start},mode=refuse"),
            1 => format!("fail:{dur}@{start},mode=reset,pct={pct}"),
            2 => format!("fail:{dur}@{start},mode=close"),
            3 => format!("slow:{dur}@{start},latency={latency},jitter={jitter},pct={pct}"),
            4 => format!("slow:{dur}@{start},latency={latency},dist=exp"),
            5 => format!("restart-cold:{dur}@{start},warmup={warmup},floor={floor}"),
            6 => format!("cold:{dur}@{start},pct={pct}"),
            _ => format!("bandwidth:{dur}@{start},rate={kb}"),
        };
        let f: Fault = spec.parse().unwrap();
        prop_assert_eq!((f.duration, f.start), (Duration::from_millis(dur_ms), Duration::from_millis(start_ms)));
        let ms = Duration::from_millis;
        match (kind, f.kind) {
            (0, FaultKind::Fail(FailMode::Refuse))
            | (1, FaultKind::Fail(FailMode::Reset))
            | (2, FaultKind::Fail(FailMode::Close)) => {}
            (3, FaultKind::Slow(Delay::Uniform { latency: l, jitter: j })) => {
                // The jitter is clamped to the latency (a delay is never negative).
                prop_assert_eq!((l, j), (ms(latency), ms(jitter.min(latency))));
            }
            (4, FaultKind::Slow(Delay::Exponential(l))) => prop_assert_eq!(l, ms(latency)),
            (5, FaultKind::RestartCold { warmup: w, floor: fl }) => {
                prop_assert_eq!((w, fl), (ms(warmup_ms), floor));
            }
            (6, FaultKind::RestartCold { warmup: w, floor: fl }) => {
                // The documented defaults: a 10 s warm-up from a 10 % floor.
                prop_assert_eq!((w, fl), (Duration::from_secs(10), 10.0));
            }
            (7, FaultKind::Bandwidth { bytes_per_s }) => prop_assert_eq!(bytes_per_s, kb * 1000),
            (k, got) => prop_assert!(false, "kind {} parsed as {:?}", k, got),
        }
        let want_pct = if matches!(kind, 1 | 3 | 6) { f64::from(pct) } else { 100.0 };
        prop_assert_eq!(f.percent, want_pct);
        let again: Fault = f.to_string().parse().unwrap();
        prop_assert_eq!(again, f);
    }

    #[test]
    fn fault_values_out_of_range_name_their_field(
        over in 1u64..1_000_000, kind in 0..3usize,
    ) {
        let (spec, field) = match kind {
            0 => (format!("fail:{}", MAX_SECONDS as u64 + over), "SECONDS"),
            1 => (format!("fail:1@{}", MAX_SECONDS as u64 + over), "START"),
            _ => (format!("slow:1,latency={}", MAX_LATENCY_MS + over), "latency"),
        };
        let e = spec.parse::<Fault>().unwrap_err().to_string();
        prop_assert!(e.starts_with("--fault") && e.contains(field), "{}: {}", spec, e);
        // Through --fault NAME:…, the same error.
        let mut p = params();
        p.add_proxy("db=127.0.0.1:7000,127.0.0.1:5432").unwrap();
        let e2 = p.add_fault(&format!("db:{spec}")).unwrap_err().to_string();
        prop_assert_eq!(e2, e);
    }

    #[test]
    fn synthetic_faults_round_trip_and_refuse_out_of_range(k in 0..4usize, secs in 1u32..=600, over in 1u32..10_000) {
        let kind = ["fail", "hang", "slow", "restart"][k];
        let f: FaultSpec = format!("{kind}:{secs}").parse().unwrap();
        prop_assert_eq!(f.duration, Duration::from_secs(u64::from(secs)));
        prop_assert_eq!(f.to_string().parse::<FaultSpec>().unwrap(), f);
        let e = format!("{kind}:{}", 600 + over).parse::<FaultSpec>().unwrap_err().to_string();
        prop_assert!(e.starts_with("--fault") && e.contains("SECONDS"), "{}", e);
    }

    #[test]
    fn lab_file_values_out_of_range_name_their_field(over in 1.0f64..1e9, field in 0..3usize) {
        let key = ["duration_s", "at_s", "ready_timeout_s"][field];
        let json = format!(r#"{{"target":"http://127.0.0.1:1/","{key}":{}}}"#, 3600.0 + over);
        let e = TargetParams::from_json(&json).unwrap_err().to_string();
        prop_assert!(e.starts_with(key), "{}", e);
        let neg = format!(r#"{{"target":"http://127.0.0.1:1/","{key}":{}}}"#, -over);
        let e = TargetParams::from_json(&neg).unwrap_err().to_string();
        prop_assert!(e.starts_with(key), "{}", e);
    }

    #[test]
    fn lab_files_parse_to_the_values_written(
        rate in 1u32..=1000, dur in 2u32..=60, at in 0u32..=1, seed in any::<u64>(), n in name(),
    ) {
        let json = serde_json::json!({
            "target": "http://127.0.0.1:8080/x",
            "proxies": [format!("{n}=127.0.0.1:7000,127.0.0.1:5432,tcp")],
            "faults": [format!("{n}:fail:1")],
            "configs": [format!("{n}=./start.sh")],
            "rate": rate, "duration_s": dur, "at_s": at, "seed": seed,
        });
        let p = TargetParams::from_json(&json.to_string()).unwrap();
        prop_assert_eq!(p.rate, f64::from(rate));
        prop_assert_eq!(p.duration, Duration::from_secs(u64::from(dur)));
        prop_assert_eq!(p.at, Duration::from_secs(u64::from(at)));
        prop_assert_eq!(p.seed, seed);
        prop_assert_eq!(&p.proxies[0].name, &n);
        prop_assert_eq!(p.proxies[0].config.mode, Mode::Tcp);
        prop_assert_eq!(p.resolved_faults()[0].1.start, p.at);
        prop_assert_eq!(p.configs[0].command.as_deref(), Some("./start.sh"));
    }
}
