//! The third-party processes of the example stack: HAProxy and nginx, started from the
//! templates in `crates/seawall-lab/stack/` on free loopback ports, stopped by a Drop guard.

use std::net::SocketAddr;
use std::path::Path;

const HAPROXY_TMPL: &str = include_str!("../../stack/haproxy.cfg.tmpl");
const NGINX_TMPL: &str = include_str!("../../stack/nginx.conf.tmpl");

/// The retry settings of the two proxies, as they go into their configuration files.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retries {
    /// HAProxy `retries N` (retries after the first attempt).
    pub(crate) haproxy_retries: u32,
    /// HAProxy `retry-on` (`503`, or `none` to turn it off).
    pub(crate) haproxy_retry_on: &'static str,
    /// nginx `proxy_next_upstream` (`error timeout http_503`, or `off`).
    pub(crate) nginx_next_upstream: &'static str,
    /// nginx `proxy_next_upstream_tries K` (tries in all, first included).
    pub(crate) nginx_tries: u32,
}

pub(crate) use seawall_testkit::{Guard, free_port, start_nginx_conf, temp_dir};

/// Fills `{{KEY}}` placeholders; panics on one left unfilled (a template and test out of step).
pub(crate) fn render(template: &str, vars: &[(&str, String)]) -> String {
    let mut out = template.to_owned();
    for (k, v) in vars {
        out = out.replace(&format!("{{{{{k}}}}}"), v);
    }
    assert!(!out.contains("{{"), "unfilled placeholder in\n{out}");
    out
}

/// Starts nginx on `port` over `backends` with `r`'s retry settings.
pub(crate) fn start_nginx(
    program: &Path,
    port: u16,
    backends: &[SocketAddr],
    r: &Retries,
) -> Guard {
    let servers: Vec<String> =
        backends.iter().map(|a| format!("        server {a} max_fails=0;")).collect();
    start_nginx_conf(program, port, |prefix| {
        render(
            NGINX_TMPL,
            &[
                ("PREFIX", prefix.to_owned()),
                ("NGINX_PORT", port.to_string()),
                ("NGINX_SERVERS", servers.join("\n")),
                ("NGINX_NEXT_UPSTREAM", r.nginx_next_upstream.to_owned()),
                ("NGINX_TRIES", r.nginx_tries.to_string()),
            ],
        )
    })
}

/// Starts HAProxy on `edge_port` in front of nginx on `nginx_port` with `r`'s retry settings.
pub(crate) fn start_haproxy(program: &Path, edge_port: u16, nginx_port: u16, r: &Retries) -> Guard {
    let dir = temp_dir("haproxy");
    let conf = render(
        HAPROXY_TMPL,
        &[
            ("EDGE_PORT", edge_port.to_string()),
            ("NGINX_PORT", nginx_port.to_string()),
            ("HAPROXY_RETRIES", r.haproxy_retries.to_string()),
            ("HAPROXY_RETRY_ON", r.haproxy_retry_on.to_owned()),
        ],
    );
    let file = dir.join("haproxy.cfg");
    std::fs::write(&file, conf).unwrap();
    let file = file.display().to_string();
    // -db: foreground, one process, no daemon (so the guard's kill stops it all).
    let mut g = Guard::spawn("haproxy", program, &["-db", "-f", &file], dir);
    g.wait_listening(SocketAddr::from(([127, 0, 0, 1], edge_port)));
    g
}
