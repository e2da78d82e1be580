//! A scenario written with `to_toml` reads back as the same scenario: for every file of the
//! catalog, and for files built in code (proptest), raw or validated.

use std::collections::BTreeMap;

use proptest::prelude::*;
use seawall_sim::Scenario;
use seawall_sim::policy::Preset;
use seawall_sim::scenario::{
    AdmissionCut, Arrivals, BackoffKind, Balance, BudgetKind, ClientOverride, Degrade, Edge,
    FanOut, FaultKind, FaultSpec, Herd, OutageMode, PolicyOverride, RatePoint, Refresh,
    ScenarioFile, ServerLimit, ServerSlot, Servers, Service, Spike, Tier,
};

#[test]
fn every_catalog_scenario_reads_back_as_itself() {
    for name in seawall_sim::catalog::names() {
        let e = seawall_sim::catalog::get(&name).unwrap();
        let s = Scenario::parse(e.name, e.text, &[]).unwrap();
        let text = s.to_toml().unwrap();
        let again =
            Scenario::parse(e.name, &text, &[]).unwrap_or_else(|err| panic!("{err}\n{text}"));
        assert_eq!(again, s, "{}:\n{text}", e.name);
    }
}

#[test]
fn a_written_file_is_strict_toml_of_the_schema() {
    // Control: an unknown field in the written text is still refused.
    let e = seawall_sim::catalog::get("bronson").unwrap();
    let text = Scenario::parse(e.name, e.text, &[]).unwrap().to_toml().unwrap();
    let typo = text.replacen("deadline_ms", "dedline_ms", 1);
    assert!(Scenario::parse("t.toml", &typo, &[]).is_err(), "{typo}");
}

/// A finite number of any magnitude (NaN would never compare equal to itself).
fn num() -> impl Strategy<Value = f64> {
    prop_oneof![
        0.0..1e4f64,
        -1e6..1e6f64,
        proptest::num::f64::NORMAL | proptest::num::f64::ZERO | proptest::num::f64::SUBNORMAL,
    ]
}

/// Names with dots, quotes, spaces, newlines and non-ASCII text, which must stay one key.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![Just("db".to_string()), "[a-z]{1,6}", "\\PC{0,8}", "[a.\" \\n\\\\é]{1,6}"]
}

fn preset() -> impl Strategy<Value = Preset> {
    proptest::sample::select(Preset::ALL.to_vec())
}

fn backoff() -> impl Strategy<Value = BackoffKind> {
    prop_oneof![
        Just(BackoffKind::None),
        Just(BackoffKind::Constant),
        Just(BackoffKind::Exponential),
        Just(BackoffKind::FullJitter),
        Just(BackoffKind::EqualJitter),
        Just(BackoffKind::Decorrelated),
    ]
}

fn budget() -> impl Strategy<Value = BudgetKind> {
    prop_oneof![
        Just(BudgetKind::None),
        Just(BudgetKind::Grpc),
        Just(BudgetKind::Aws),
        Just(BudgetKind::Ratio),
        Just(BudgetKind::Envoy),
        Just(BudgetKind::Adaptive),
    ]
}

fn client() -> impl Strategy<Value = ClientOverride> {
    (
        proptest::option::of(0u32..20),
        proptest::option::of(backoff()),
        proptest::option::of(num()),
        proptest::option::of(num()),
        proptest::option::of(budget()),
        proptest::option::of(num()),
        (proptest::option::of(0u32..8), proptest::option::of(num())),
    )
        .prop_map(
            |(attempts, backoff, base_ms, cap_ms, budget, timeout_ms, (hedges, delay))| {
                ClientOverride {
                    attempts,
                    backoff,
                    base_ms,
                    cap_ms,
                    budget,
                    timeout_ms,
                    hedge_max_attempts: hedges,
                    hedge_delay_ms: delay,
                }
            },
        )
}

fn policy() -> impl Strategy<Value = PolicyOverride> {
    let flags = proptest::collection::vec(proptest::option::of(any::<bool>()), 6);
    (
        (
            proptest::option::of(preset()),
            proptest::option::of(0u32..20),
            proptest::option::of(backoff()),
        ),
        (proptest::option::of(num()), proptest::option::of(num()), proptest::option::of(budget())),
        flags,
        proptest::option::of(num()),
        proptest::option::of(client()),
        proptest::collection::btree_map(name(), client(), 0..3),
        (proptest::option::of(0u32..8), proptest::option::of(num())),
        (
            proptest::option::of(prop_oneof![
                Just(ServerLimit::Fixed),
                Just(ServerLimit::Gradient)
            ]),
            proptest::option::of(prop_oneof![Just(ServerSlot::Service), Just(ServerSlot::Handler)]),
        ),
    )
        .prop_map(
            |(
                (base, attempts, backoff),
                (base_ms, cap_ms, budget),
                f,
                herd,
                edge,
                tier,
                (hedges, delay),
                (limit, slot),
            )| {
                PolicyOverride {
                    base,
                    attempts,
                    backoff,
                    base_ms,
                    cap_ms,
                    budget,
                    single_owner: f[0],
                    deadline_propagation: f[1],
                    cancellation: f[2],
                    pushback: f[3],
                    server_protection: f[4],
                    server_limit: limit,
                    server_slot: slot,
                    honour_hints: f[5],
                    herd_spread_s: herd,
                    hedge_max_attempts: hedges,
                    hedge_delay_ms: delay,
                    edge,
                    tier,
                }
            },
        )
}

fn edge() -> impl Strategy<Value = Edge> {
    (
        (num(), num(), any::<bool>(), proptest::option::of(num())),
        proptest::collection::vec(
            (num(), num()).prop_map(|(at_s, rate)| RatePoint { at_s, rate }),
            0..3,
        ),
        proptest::collection::vec(
            (num(), num(), num()).prop_map(|(start_s, end_s, rate)| Spike { start_s, end_s, rate }),
            0..2,
        ),
        proptest::collection::vec(
            (num(), 0u64..1 << 40, num()).prop_map(|(at_s, clients, spread_s)| Herd {
                at_s,
                clients,
                spread_s,
            }),
            0..2,
        ),
        proptest::option::of(
            (num(), num(), any::<u32>()).prop_map(|(probability, delay_ms, max)| Refresh {
                probability,
                delay_ms,
                max,
            }),
        ),
    )
        .prop_map(|((rate, deadline_ms, retries, timeout_ms), ramp, spike, herd, refresh)| {
            let instances = (rate.to_bits() % 7) as u32;
            let arrivals =
                if rate.to_bits() % 2 == 0 { Arrivals::Poisson } else { Arrivals::Uniform };
            Edge {
                rate,
                arrivals,
                ramp,
                spike,
                herd,
                deadline_ms,
                retries,
                timeout_ms,
                refresh,
                instances,
            }
        })
}

fn tier() -> impl Strategy<Value = Tier> {
    let service = (num(), proptest::option::of(num()), proptest::option::of(num()))
        .prop_map(|(mean_ms, p50_ms, p99_ms)| Service { mean_ms, p50_ms, p99_ms });
    let degrade = (
        proptest::option::of(num()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        num(),
    )
        .prop_map(|(above_rps, above_in_system, full_in_system, factor)| Degrade {
            above_rps,
            above_in_system,
            full_in_system,
            factor,
        });
    let balance =
        prop_oneof![Just(Balance::RoundRobin), Just(Balance::Random), Just(Balance::LeastRequests)];
    let fan_out = prop_oneof![Just(FanOut::Sequence), Just(FanOut::Parallel)];
    let servers = prop_oneof![Just(Servers::Pool), Just(Servers::PerInstance)];
    let topology = (
        any::<u32>(),
        servers,
        any::<u32>(),
        balance,
        proptest::option::of(proptest::collection::vec(name(), 0..3)),
        fan_out,
        proptest::option::of(num()),
    );
    (
        (name(), any::<u32>(), any::<u32>()),
        service,
        proptest::option::of(degrade),
        proptest::option::of(num()),
        any::<bool>(),
        topology,
    )
        .prop_map(
            |(
                (name, workers, queue_limit),
                service,
                degrade,
                timeout_ms,
                retries,
                (instances, servers, replicas, balance, calls, fan_out, contention_window_ms),
            )| Tier {
                name,
                workers,
                queue_limit,
                service,
                degrade,
                timeout_ms,
                retries,
                instances,
                servers,
                replicas,
                balance,
                calls,
                fan_out,
                contention_window_ms,
            },
        )
}

fn fault() -> impl Strategy<Value = FaultSpec> {
    let kind = prop_oneof![
        Just(FaultKind::Outage),
        Just(FaultKind::Latency),
        Just(FaultKind::Capacity),
        Just(FaultKind::Restart),
    ];
    let mode = prop_oneof![Just(OutageMode::Hold), Just(OutageMode::Fail)];
    let opt = || proptest::option::of(num());
    let replica = proptest::option::of(any::<u32>());
    ((kind, name(), num(), num(), mode), (opt(), opt(), opt(), opt()), replica).prop_map(
        |(
            (kind, tier, start_s, duration_s, mode),
            (p50_ms, p99_ms, capacity, cold_factor),
            replica,
        )| {
            FaultSpec {
                kind,
                tier,
                start_s,
                duration_s,
                mode,
                p50_ms,
                p99_ms,
                capacity,
                cold_factor,
                replica,
            }
        },
    )
}

fn cut() -> impl Strategy<Value = AdmissionCut> {
    (name(), num(), num(), any::<u8>()).prop_map(|(tier, start_s, duration_s, admit_percent)| {
        AdmissionCut { tier, start_s, duration_s, admit_percent }
    })
}

/// Any file the schema can hold, valid or not.
fn raw_file() -> impl Strategy<Value = ScenarioFile> {
    (
        (name(), "\\PC{0,20}", num(), proptest::collection::vec(name(), 0..3)),
        edge(),
        proptest::collection::vec(tier(), 0..4),
        (proptest::collection::vec(fault(), 0..3), proptest::collection::vec(cut(), 0..2)),
        proptest::collection::btree_map(name(), policy(), 0..3),
    )
        .prop_map(
            |(
                (name, description, duration_s, default_policies),
                edge,
                tiers,
                (faults, operator),
                policies,
            )| {
                ScenarioFile {
                    name,
                    description,
                    duration_s,
                    default_policies,
                    edge,
                    tiers,
                    faults,
                    operator,
                    policies,
                }
            },
        )
}

/// A file that validates: a chain of uniquely named tiers, faults on them, policies over presets
/// with per-layer settings on the calling tiers.
fn valid_file() -> impl Strategy<Value = ScenarioFile> {
    (1usize..5, 1.0..600.0f64, 0.0..5000.0f64, 1.0..30_000.0f64, any::<bool>())
        .prop_flat_map(|(n, duration_s, rate, deadline_ms, retries)| {
            let tiers = proptest::collection::vec(
                (
                    0u32..64,
                    1u32..10_000,
                    0.0..200.0f64,
                    proptest::option::of(1.0..5_000.0f64),
                    any::<bool>(),
                ),
                n,
            );
            let faults = proptest::collection::vec(
                (0..n, 0.0..duration_s, 0.0..100.0f64, 0usize..4, 0.0..1.0f64),
                0..3,
            );
            let policies = proptest::collection::btree_map(
                "[a-z][a-z.\" -]{0,7}",
                (
                    preset(),
                    proptest::option::of(1u32..6),
                    proptest::option::of(backoff()),
                    proptest::option::of(budget()),
                    proptest::option::of(any::<bool>()),
                    proptest::option::of((1u32..6, 1.0..1000.0f64, 1u32..6, 0.0..500.0f64)),
                ),
                0..3,
            );
            (Just((duration_s, rate, deadline_ms, retries)), tiers, faults, policies)
        })
        .prop_map(|((duration_s, rate, deadline_ms, retries), tiers, faults, policies)| {
            let n = tiers.len();
            let tiers: Vec<Tier> = tiers
                .into_iter()
                .enumerate()
                .map(|(i, (workers, queue_limit, mean_ms, timeout_ms, retries))| Tier {
                    name: format!("t.{i} \"x\""),
                    workers,
                    queue_limit,
                    service: Service { mean_ms, p50_ms: None, p99_ms: None },
                    degrade: (i % 2 == 1).then_some(Degrade {
                        above_rps: None,
                        above_in_system: Some(workers + 1),
                        full_in_system: Some(workers * 3 + 2),
                        factor: 3.0,
                    }),
                    timeout_ms: timeout_ms.filter(|_| i + 1 < n),
                    retries,
                    // Instances on every tier but the bottom; replicas anywhere.
                    instances: if i + 1 < n { 1 + workers % 3 } else { 1 },
                    replicas: 1 + queue_limit % 2,
                    // Per-instance servers where there is one replica, every other tier.
                    servers: if queue_limit % 2 == 0 && i % 2 == 0 {
                        Servers::PerInstance
                    } else {
                        Servers::Pool
                    },
                    balance: [Balance::RoundRobin, Balance::Random, Balance::LeastRequests][i % 3],
                    calls: None,
                    fan_out: FanOut::default(),
                    contention_window_ms: (i + 1 == n).then_some(mean_ms),
                })
                .collect();
            let faults = faults
                .into_iter()
                .map(|(t, start_s, duration_s, kind, x)| FaultSpec {
                    kind: [
                        FaultKind::Outage,
                        FaultKind::Latency,
                        FaultKind::Capacity,
                        FaultKind::Restart,
                    ][kind],
                    tier: tiers[t].name.clone(),
                    start_s,
                    duration_s,
                    mode: if x < 0.5 { OutageMode::Hold } else { OutageMode::Fail },
                    p50_ms: (kind == 1).then_some(10.0 + x),
                    p99_ms: (kind == 1).then_some(100.0 + x),
                    capacity: (kind == 2).then_some(x),
                    cold_factor: (kind == 3).then_some(1.0 + 10.0 * x),
                    replica: None,
                })
                .collect();
            let caller = (n > 1).then(|| tiers[0].name.clone());
            let policies: BTreeMap<String, PolicyOverride> = policies
                .into_iter()
                .map(|(k, (base, attempts, backoff, budget, pushback, layer))| {
                    let tier = match (&caller, layer) {
                        (Some(c), Some((a, t, hedges, delay))) => BTreeMap::from([(
                            c.clone(),
                            ClientOverride {
                                attempts: Some(a),
                                timeout_ms: Some(t),
                                // Hedging spends from the gRFC A6 token bucket (or nothing).
                                budget: Some(BudgetKind::Grpc),
                                hedge_max_attempts: Some(hedges),
                                hedge_delay_ms: Some(delay),
                                ..Default::default()
                            },
                        )]),
                        _ => BTreeMap::new(),
                    };
                    let o = PolicyOverride {
                        base: Some(base),
                        attempts,
                        backoff,
                        budget,
                        pushback,
                        tier,
                        ..Default::default()
                    };
                    (k, o)
                })
                .collect();
            ScenarioFile {
                name: "generated".into(),
                description: "built in code".into(),
                duration_s,
                default_policies: vec!["naive".into(), "seawall".into()],
                edge: Edge {
                    rate,
                    arrivals: Arrivals::Poisson,
                    ramp: vec![
                        RatePoint { at_s: 0.0, rate },
                        RatePoint { at_s: duration_s, rate: rate / 3.0 },
                    ],
                    spike: Vec::new(),
                    herd: Vec::new(),
                    deadline_ms,
                    retries,
                    timeout_ms: None,
                    refresh: None,
                    instances: 2,
                },
                tiers,
                faults,
                operator: Vec::new(),
                policies,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_raw_file_reads_back_as_itself(file in raw_file()) {
        let text = file.to_toml().unwrap();
        let again: ScenarioFile = toml::from_str(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(again, file, "{}", text);
    }

    #[test]
    fn a_valid_scenario_built_in_code_reads_back_as_itself(file in valid_file()) {
        let s = Scenario::new(file).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let text = s.to_toml().unwrap();
        let again = Scenario::parse("generated.toml", &text, &[])
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(again, s, "{}", text);
    }
}
