//! Starting lab nodes — as child processes (the CLI) or as threads with their own runtime
//! (tests) — and making sure none outlives the run.
//!
//! A child binds two ports on 127.0.0.1 (traffic, admin) and prints
//! `SEAWALL_LAB_PORT <port> <admin port>` on stdout; it reads its admin token from
//! [`ADMIN_TOKEN_ENV`], never from its command line. It exits when its
//! `--max-runtime` is up, when its stdin closes (the parent died or dropped the handle), or on
//! Ctrl-C; the parent also kills it when the handle drops (`kill_on_drop`).

use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use crate::LabError;
use crate::node::{self, ADMIN_TOKEN_ENV, NodeSpec};

/// The line a child prints once it listens.
pub const PORT_LINE: &str = "SEAWALL_LAB_PORT";

/// How long a node may take to report its port.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// How nodes are started.
#[derive(Debug, Clone)]
pub enum Launcher {
    /// Each node is a child process: `exe args… --spec JSON --max-runtime SECONDS`.
    Process {
        /// The executable (the `seawall` binary).
        exe: PathBuf,
        /// Arguments before `--spec` (e.g. `["lab-node"]`).
        args: Vec<String>,
    },
    /// Each node is a thread of this process with its own tokio runtime (tests).
    InProcess,
    /// No node is started: the stack runs in memory on a virtual clock (the `vlab` module).
    Virtual(crate::config::VirtualParams),
}

/// A running node. Dropping it stops the node.
#[derive(Debug)]
pub struct NodeHandle {
    port: u16,
    admin_port: u16,
    _alive: Alive,
}

#[derive(Debug)]
enum Alive {
    Child(#[allow(dead_code)] Child),
    Thread(#[allow(dead_code)] oneshot::Sender<()>),
}

impl NodeHandle {
    /// The node's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:ADMIN_PORT`: the node's admin listener (see [`node::admin`]).
    pub fn admin_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.admin_port)
    }
}

impl Launcher {
    /// Starts `spec`, which stops by itself after `max_runtime`.
    pub async fn spawn(
        &self,
        spec: &NodeSpec,
        max_runtime: Duration,
    ) -> Result<NodeHandle, LabError> {
        let name = spec.role.as_str();
        match self {
            Launcher::Process { exe, args } => {
                let mut cmd = Command::new(exe);
                if let Some(t) = &spec.admin_token {
                    cmd.env(ADMIN_TOKEN_ENV, t);
                }
                let mut child = cmd
                    .args(args)
                    .arg("--spec")
                    .arg(spec.to_json())
                    .arg("--max-runtime")
                    .arg(max_runtime.as_secs().max(1).to_string())
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|e| {
                        LabError::node(name, format!("cannot start {}: {e}", exe.display()))
                    })?;
                let out = child.stdout.take().ok_or_else(|| LabError::node(name, "no stdout"))?;
                let mut lines = BufReader::new(out).lines();
                let line = tokio::time::timeout(START_TIMEOUT, lines.next_line())
                    .await
                    .map_err(|_| LabError::node(name, "did not report its port in time"))??
                    .ok_or_else(|| LabError::node(name, "exited before reporting its port"))?;
                let (port, admin_port) = parse_port_line(&line).ok_or_else(|| {
                    LabError::node(name, format!("unexpected first line {line:?}"))
                })?;
                Ok(NodeHandle { port, admin_port, _alive: Alive::Child(child) })
            }
            Launcher::Virtual(_) => Err(LabError::node(
                name,
                "the virtual lab starts no node: its stack runs in memory",
            )),
            Launcher::InProcess => {
                let (port_tx, port_rx) = oneshot::channel();
                let (stop_tx, stop_rx) = oneshot::channel::<()>();
                let spec = spec.clone();
                std::thread::Builder::new().name(format!("lab-{name}")).spawn(move || {
                    let rt = match tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(1)
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => rt,
                        Err(e) => return drop(port_tx.send(Err(LabError::Io(e)))),
                    };
                    rt.block_on(async move {
                        let (listener, admin) =
                            match (node::bind_loopback().await, node::bind_loopback().await) {
                                (Ok(l), Ok(a)) => (l, a),
                                (Err(e), _) | (_, Err(e)) => return drop(port_tx.send(Err(e))),
                            };
                        let port = |l: &tokio::net::TcpListener| {
                            l.local_addr().map(|a| a.port()).unwrap_or(0)
                        };
                        let _ = port_tx.send(Ok((port(&listener), port(&admin))));
                        let stop = async move {
                            tokio::select! {
                                _ = stop_rx => {}
                                () = tokio::time::sleep(max_runtime) => {}
                            }
                        };
                        let _ = node::serve(spec, listener, admin, stop).await;
                    });
                })?;
                let (port, admin_port) = tokio::time::timeout(START_TIMEOUT, port_rx)
                    .await
                    .map_err(|_| LabError::node(name, "did not report its port in time"))?
                    .map_err(|_| LabError::node(name, "thread died before reporting its port"))??;
                Ok(NodeHandle { port, admin_port, _alive: Alive::Thread(stop_tx) })
            }
        }
    }
}

fn parse_port_line(line: &str) -> Option<(u16, u16)> {
    let mut ports = line.strip_prefix(PORT_LINE)?.split_whitespace().map(|p| p.parse().ok());
    match (ports.next(), ports.next(), ports.next()) {
        (Some(Some(p)), Some(Some(a)), None) => Some((p, a)),
        _ => None,
    }
}

/// The body of a child node (`seawall lab-node`): serves `spec_json` (with the admin token from
/// [`ADMIN_TOKEN_ENV`]) on free loopback ports, prints them, and returns when `max_runtime` is
/// up, stdin closes, or on Ctrl-C.
pub fn run_child(spec_json: &str, max_runtime: Duration) -> Result<(), LabError> {
    let mut spec = NodeSpec::from_json(spec_json)?;
    spec.admin_token = std::env::var(ADMIN_TOKEN_ENV).ok();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        let listener = node::bind_loopback().await?;
        let admin = node::bind_loopback().await?;
        let (port, admin_port) = (listener.local_addr()?.port(), admin.local_addr()?.port());
        println!("{PORT_LINE} {port} {admin_port}");
        let stop = async move {
            let mut stdin = tokio::io::stdin();
            let mut buf = [0u8; 64];
            let parent_gone = async {
                // Read until EOF: the parent closed our stdin (it exited or dropped us).
                while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
            };
            tokio::select! {
                () = parent_gone => {}
                () = tokio::time::sleep(max_runtime) => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        };
        node::serve(spec, listener, admin, stop).await
    })?;
    // Dropping the runtime cancels in-flight work at once.
    drop(rt);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_line_round_trips() {
        assert_eq!(parse_port_line("SEAWALL_LAB_PORT 4242 4343"), Some((4242, 4343)));
        assert_eq!(parse_port_line("SEAWALL_LAB_PORT 4242"), None);
        assert_eq!(parse_port_line("SEAWALL_LAB_PORT 1 2 3"), None);
        assert_eq!(parse_port_line("PORT 1 2"), None);
        assert_eq!(parse_port_line("SEAWALL_LAB_PORT x 1"), None);
    }
}
