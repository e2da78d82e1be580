//! The third-party processes of the example stack: HAProxy and nginx, started from the
//! templates in `crates/seawall-lab/stack/` on free loopback ports, stopped by a Drop guard.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

/// A program found on PATH or in the sbin folders Debian installs daemons in.
pub(crate) fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A loopback port free a moment ago (HAProxy and nginx need a number in their files).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Fills `{{KEY}}` placeholders; panics on one left unfilled (a template and test out of step).
pub(crate) fn render(template: &str, vars: &[(&str, String)]) -> String {
    let mut out = template.to_owned();
    for (k, v) in vars {
        out = out.replace(&format!("{{{{{k}}}}}"), v);
    }
    assert!(!out.contains("{{"), "unfilled placeholder in\n{out}");
    out
}

/// A child process killed and reaped on drop, with the folder of its files removed.
pub(crate) struct Guard {
    name: &'static str,
    child: Child,
    dir: PathBuf,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Guard {
    /// The process id (gone from `/proc` once the guard has dropped).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Panics with the process's log if it has exited.
    fn check_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            let log = std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default();
            panic!("{} exited ({status}): {log}", self.name);
        }
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir =
        std::env::temp_dir().join(format!("seawall-stack-{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Waits until `addr` accepts a connection: at most 100 tries over about 5 s.
fn wait_listening(guard: &mut Guard, addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(5);
    for _ in 0..100 {
        guard.check_alive();
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(50)).is_ok() {
            return;
        }
        if Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{} is not listening on {addr}", guard.name);
}

fn spawn(name: &'static str, program: &Path, args: &[&str], dir: PathBuf) -> Guard {
    let log = std::fs::File::create(dir.join("error.log")).unwrap();
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    Guard { name, child, dir }
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

/// Starts nginx listening on 127.0.0.1:`port` with the configuration `conf` makes from its
/// prefix folder (where its pid, log and temporary files go).
pub(crate) fn start_nginx_conf(
    program: &Path,
    port: u16,
    conf: impl FnOnce(&str) -> String,
) -> Guard {
    let dir = temp_dir("nginx");
    let file = dir.join("nginx.conf");
    std::fs::write(&file, conf(&dir.display().to_string())).unwrap();
    let prefix = format!("{}/", dir.display());
    let file = file.display().to_string();
    let mut g = spawn("nginx", program, &["-p", &prefix, "-c", &file], dir);
    wait_listening(&mut g, SocketAddr::from(([127, 0, 0, 1], port)));
    g
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
    let mut g = spawn("haproxy", program, &["-db", "-f", &file], dir);
    wait_listening(&mut g, SocketAddr::from(([127, 0, 0, 1], edge_port)));
    g
}
