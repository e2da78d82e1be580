//! `seawall lab --target` on the example stack of `crates/seawall-lab/stack/`, started by the
//! lab from its configuration files: HAProxy (`retries 2`, `retry-on 503`) in front of nginx
//! (`proxy_next_upstream error timeout http_503`, `proxy_next_upstream_tries 3`, three upstream
//! entries) in front of the lab's proxy `dep`, in front of the dependency. `--config before=…`
//! keeps the retries, `--config after=…` turns them off; the lab measures the attempts
//! reaching `dep` per edge request during a 503 fault: the configured product 3 × 3 = 9
//! before, 1 after. Ignored unless
//! asked for (`--ignored`): it needs haproxy and nginx.

mod lab_support;

use std::path::{Path, PathBuf};

use lab_support::{free_port, http_server, lab_on, read_json};
use seawall_testkit::require_external;

const HAPROXY: &str = include_str!("../../seawall-lab/stack/haproxy.cfg.tmpl");
const NGINX: &str = include_str!("../../seawall-lab/stack/nginx.conf.tmpl");

fn render(t: &str, vars: &[(&str, String)]) -> String {
    let mut out = t.to_owned();
    for (k, v) in vars {
        out = out.replace(&format!("{{{{{k}}}}}"), v);
    }
    assert!(!out.contains("{{"), "unfilled placeholder in\n{out}");
    out
}

/// Writes one configuration's files under `dir` and returns the command that starts it.
#[allow(clippy::too_many_arguments)]
fn config(
    dir: &Path,
    bins: &(PathBuf, PathBuf),
    edge: u16,
    nginx: u16,
    dep: u16,
    retries: u32,
    retry_on: &str,
    next: &str,
    tries: u32,
) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let h = render(
        HAPROXY,
        &[
            ("EDGE_PORT", edge.to_string()),
            ("NGINX_PORT", nginx.to_string()),
            ("HAPROXY_RETRIES", retries.to_string()),
            ("HAPROXY_RETRY_ON", retry_on.into()),
        ],
    );
    let servers = vec![format!("        server 127.0.0.1:{dep} max_fails=0;"); 3].join("\n");
    let n = render(
        NGINX,
        &[
            ("PREFIX", dir.display().to_string()),
            ("NGINX_PORT", nginx.to_string()),
            ("NGINX_SERVERS", servers),
            ("NGINX_NEXT_UPSTREAM", next.into()),
            ("NGINX_TRIES", tries.to_string()),
        ],
    );
    std::fs::write(dir.join("haproxy.cfg"), h).unwrap();
    std::fs::write(dir.join("nginx.conf"), n).unwrap();
    // nginx first (HAProxy is the target the lab waits for; nginx must be up behind it).
    format!(
        "{n} -p {d}/ -c {d}/nginx.conf & sleep 0.3; exec {h} -db -f {d}/haproxy.cfg",
        n = bins.1.display(),
        h = bins.0.display(),
        d = dir.display()
    )
}

#[test]
#[ignore = "needs haproxy and nginx"]
fn the_lab_measures_the_third_party_product_before_and_one_attempt_after() {
    let (h, n) = (require_external("haproxy"), require_external("nginx"));
    let bins = (h, n);
    let (dep, _server) = http_server();
    let (edge, nginx, lab_proxy) = (free_port(), free_port(), free_port());
    let out = std::env::temp_dir().join(format!("seawall-lab-stack-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let before = config(
        &out.join("before"),
        &bins,
        edge,
        nginx,
        lab_proxy,
        2,
        "503",
        "error timeout http_503",
        3,
    );
    let after = config(&out.join("after"), &bins, edge, nginx, lab_proxy, 0, "none", "off", 1);
    let run = lab_on(edge, "/checkout", lab_proxy, dep)
        .args(["--fault", "dep:fail:3@2", "--duration", "7", "--rate", "20"])
        .arg("--config")
        .arg(format!("before={before}"))
        .arg("--config")
        .arg(format!("after={after}"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{err}");
    eprintln!("{stdout}");
    let fig = read_json(&out.join("target.json"));
    let during = |i: usize| fig[i]["dependencies"][0]["per_edge_during"].as_f64().unwrap();
    let healthy = |i: usize| fig[i]["dependencies"][0]["per_edge_before"].as_f64().unwrap();
    assert_eq!(fig[0]["config"], "before");
    assert_eq!(fig[1]["config"], "after");
    let product = 3.0 * 3.0;
    // At most the product, give or take 2 %: the proxy's counts are interpolated at whole
    // seconds, which can move a few attempts across the fault window's edge (9.01 seen once).
    assert!(
        during(0) >= 0.8 * product && during(0) <= 1.02 * product,
        "before: {:.2} at dep per edge request during the fault, configured {product}",
        during(0)
    );
    assert!((0.9..=1.1).contains(&during(1)), "after: {:.2}, expected 1", during(1));
    for i in 0..2 {
        assert!((0.85..=1.15).contains(&healthy(i)), "healthy: {:.2}", healthy(i));
    }
    let results = read_json(&out.join("results.json"));
    assert_eq!(results["runs"][0]["policy"], "before");
    assert!(out.join("report.html").exists());
    let _ = std::fs::remove_dir_all(&out);
}
