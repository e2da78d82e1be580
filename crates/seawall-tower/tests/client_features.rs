//! The `client` feature alone does not build prometheus-client: the Prometheus export of the
//! client metrics is `client-prometheus` (a default feature). Checked on the dependency graph
//! cargo resolves, with the Prometheus feature as the control.

use std::process::Command;

fn normal_tree(features: &str) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["tree", "--locked", "-p", "seawall-tower", "--no-default-features", "-e", "normal"])
        .args(["--features", features])
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 tree")
}

#[test]
fn client_alone_does_not_pull_in_prometheus_client() {
    let client = normal_tree("client");
    assert!(!client.contains("prometheus-client"), "{client}");
    // Control: the export feature does.
    assert!(normal_tree("client-prometheus").contains("prometheus-client"));
}
