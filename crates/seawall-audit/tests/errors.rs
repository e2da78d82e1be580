//! Malformed input: an error naming the file, the line and what was expected — never a panic.

use std::path::Path;

use proptest::prelude::*;
use seawall_audit::import::{self, Select};
use seawall_audit::{ErrorKind, graph};

const VALID: &str = "[services.a]\nentry = true\nrps = 10\n[services.b]\n\n[[calls]]\nfrom = \"a\"\nto = \"b\"\n[[calls.retries]]\nplace = \"app\"\nattempts = 3\n";

fn err(toml: &str) -> seawall_audit::Error {
    graph::parse(Path::new("g.toml"), toml).expect_err("should be rejected")
}

#[test]
fn syntax_errors_carry_the_line() {
    let e = err(&VALID.replace("attempts = 3", "attempts = = 3"));
    assert_eq!((e.line(), e.file()), (Some(11), Path::new("g.toml")));
    assert!(matches!(e.kind(), ErrorKind::Syntax(_)));
}

#[test]
fn typos_are_rejected_not_ignored() {
    let e = err(&VALID.replace("attempts = 3", "attempts = 3\natempts = 4"));
    assert!(e.to_string().contains("atempts"), "{e}");
    assert_eq!(e.line(), Some(12));
}

#[test]
fn out_of_range_values_say_what_was_expected() {
    let e = err(&VALID.replace("attempts = 3", "attempts = 11"));
    assert_eq!(e.line(), Some(9));
    assert!(e.to_string().contains("expected an integer in [1, 10]"), "{e}");
    let e = err(&VALID.replace("rps = 10", "rps = -1"));
    assert!(e.to_string().contains("services.a.rps"), "{e}");
    let e = err(&VALID.replace("to = \"b\"", "to = \"c\""));
    assert_eq!(e.line(), Some(6));
    assert!(matches!(e.kind(), ErrorKind::NotFound { .. }));
    let e = err(&VALID.replace(
        "place = \"app\"",
        "place = \"app\"\nbudget = { kind = \"grpc\", max_tokens = 0, token_ratio = 0.1 }",
    ));
    assert!(e.to_string().contains("max_tokens"), "{e}");
}

#[test]
fn imports_resolve_relative_to_the_graph_and_report_their_own_lines() {
    let dir = tempdir();
    std::fs::write(
        dir.join("vs.yaml"),
        "kind: VirtualService\nspec:\n  http:\n  - retries:\n      attempts: [\n",
    )
    .unwrap();
    let g = format!("{VALID}[[calls.import]]\nformat = \"istio\"\nfile = \"vs.yaml\"\n");
    let e = graph::parse(&dir.join("g.toml"), &g).unwrap_err();
    assert_eq!(e.file(), dir.join("vs.yaml"));
    assert!(e.line().is_some(), "{e}");
    let missing = g.replace("vs.yaml", "nope.yaml");
    let e = graph::parse(&dir.join("g.toml"), &missing).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Io(_)));
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("seawall-audit-errors-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn data(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name))
        .unwrap()
}

/// `text` with `edits` applied: each replaces the char at a position with another.
fn mutate(text: &str, edits: &[(usize, char)]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for &(at, c) in edits {
        if !chars.is_empty() {
            let i = at % chars.len();
            chars[i] = c;
        }
    }
    chars.into_iter().collect()
}

fn all_parsers(text: &str) {
    let p = Path::new("fuzz");
    let _ = graph::parse(p, text);
    let _ = import::istio::parse(p, text, &Select::default());
    let _ = import::envoy::parse(p, text, &Select::default());
    let _ = import::grpc::parse(p, text, &Select::default());
    let _ = import::aws::parse(p, text, &Select::default());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        all_parsers(&text);
    }

    #[test]
    fn mutated_real_files_never_panic(
        which in 0usize..5,
        edits in proptest::collection::vec((any::<usize>(), prop_oneof![Just(':'), Just('-'), Just('\n'), Just(' '), Just('{'), Just('"'), Just('9'), any::<char>()]), 1..6),
    ) {
        let base = match which {
            0 => VALID.to_string(),
            1 => data("istio-retries.yaml"),
            2 => data("envoy-retry-policy.yaml"),
            3 => data("grpc-service-config.json"),
            _ => data("aws-config"),
        };
        all_parsers(&mutate(&base, &edits));
    }
}
