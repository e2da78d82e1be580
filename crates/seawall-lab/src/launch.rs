//! Starting lab nodes — as child processes (the CLI) or as threads with their own runtime
//! (tests) — and making sure none outlives the run.
//!
//! A child binds 127.0.0.1:0 and prints `SEAWALL_LAB_PORT <port>` on stdout. It exits when its
//! `--max-runtime` is up, when its stdin closes (the parent died or dropped the handle), or on
//! Ctrl-C; the parent also kills it when the handle drops (`kill_on_drop`).

use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use crate::LabError;
use crate::node::{self, NodeSpec};

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
}

/// A running node. Dropping it stops the node.
#[derive(Debug)]
pub struct NodeHandle {
    port: u16,
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
                let mut child = Command::new(exe)
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
                let port = parse_port_line(&line).ok_or_else(|| {
                    LabError::node(name, format!("unexpected first line {line:?}"))
                })?;
                Ok(NodeHandle { port, _alive: Alive::Child(child) })
            }
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
                        let listener = match node::bind_loopback().await {
                            Ok(l) => l,
                            Err(e) => return drop(port_tx.send(Err(e))),
                        };
                        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
                        let _ = port_tx.send(Ok(port));
                        let stop = async move {
                            tokio::select! {
                                _ = stop_rx => {}
                                () = tokio::time::sleep(max_runtime) => {}
                            }
                        };
                        let _ = node::serve(spec, listener, stop).await;
                    });
                })?;
                let port = tokio::time::timeout(START_TIMEOUT, port_rx)
                    .await
                    .map_err(|_| LabError::node(name, "did not report its port in time"))?
                    .map_err(|_| LabError::node(name, "thread died before reporting its port"))??;
                Ok(NodeHandle { port, _alive: Alive::Thread(stop_tx) })
            }
        }
    }
}

fn parse_port_line(line: &str) -> Option<u16> {
    line.strip_prefix(PORT_LINE)?.trim().parse().ok()
}

/// The body of a child node (`seawall lab-node`): serves `spec_json` on a free loopback port,
/// prints the port, and returns when `max_runtime` is up, stdin closes, or on Ctrl-C.
pub fn run_child(spec_json: &str, max_runtime: Duration) -> Result<(), LabError> {
    let spec = NodeSpec::from_json(spec_json)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async move {
        let listener = node::bind_loopback().await?;
        let port = listener.local_addr()?.port();
        println!("{PORT_LINE} {port}");
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
        node::serve(spec, listener, stop).await
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
        assert_eq!(parse_port_line("SEAWALL_LAB_PORT 4242"), Some(4242));
        assert_eq!(parse_port_line("PORT 1"), None);
        assert_eq!(parse_port_line("SEAWALL_LAB_PORT x"), None);
    }
}
