//! A configuration's command (`--config NAME='command'`): started in a process group of its
//! own, stopped with everything it started.
//!
//! The command runs as `sh -c COMMAND` in a new process group (its leader's pid is the group
//! id), so the daemons it starts — an `haproxy … & exec nginx …` — are reached by one signal
//! to the group. It is stopped (SIGTERM to the group, then SIGKILL after a grace period) at
//! the end of its run, on an error, when its handle drops (Ctrl-C drops the lab's future), and
//! — when a reaper is asked for — when the lab itself is killed: the reaper (`seawall
//! lab-reaper`) is a small child of the lab that waits for its stdin to close, which happens
//! when the lab exits however it exits (SIGKILL included), and then kills the group.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};

use crate::LabError;

/// How long a stopped group gets between SIGTERM and SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// `PATH` for a configuration's command: the folder of the running `seawall` binary first, so a
/// command that calls `seawall node …` or `seawall proxy …` runs the binary that started the
/// lab (a fresh `cargo build`'s, say), not another `seawall` installed elsewhere or none.
/// `None` when the running program is not a `seawall` binary (the lab as a library).
fn path_with_own_binary() -> Option<std::ffi::OsString> {
    let exe = std::env::current_exe().ok()?;
    if exe.file_stem()? != "seawall" {
        return None;
    }
    let dir = exe.parent()?.to_path_buf();
    let old = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(&old))).ok()
}

/// A running command. Dropping it kills its process group.
#[derive(Debug)]
pub struct StackCommand {
    name: String,
    child: Child,
    pgid: Pid,
    reaper: Option<Child>,
}

fn group_alive(pgid: Pid) -> bool {
    test_kill_process_group(pgid).is_ok()
}

/// Sends `sig` to the group `pgid`, then waits (bounded by `grace`, polled) until no process
/// of it is left; true if the group is gone.
pub fn signal_group_and_wait(pgid: Pid, sig: Signal, grace: Duration) -> bool {
    let _ = kill_process_group(pgid, sig);
    let until = Instant::now() + grace;
    while Instant::now() < until {
        if !group_alive(pgid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !group_alive(pgid)
}

/// SIGTERM, then SIGKILL after `grace`, to the whole group.
pub fn stop_group(pgid: Pid, grace: Duration) {
    if !signal_group_and_wait(pgid, Signal::TERM, grace) {
        signal_group_and_wait(pgid, Signal::KILL, Duration::from_secs(2));
    }
}

impl StackCommand {
    /// Starts `sh -c command` in a new process group, its stdout and stderr appended to `log`.
    /// With `reaper` (`[exe, args…]`), a reaper process is started beside it.
    pub fn start(
        name: &str,
        command: &str,
        log: &Path,
        reaper: Option<&[PathBuf]>,
    ) -> Result<StackCommand, LabError> {
        let bad = |e: std::io::Error| LabError::node(format!("config {name}"), e.to_string());
        let out = std::fs::OpenOptions::new().create(true).append(true).open(log).map_err(bad)?;
        let err = out.try_clone().map_err(bad)?;
        let mut cmd = Command::new("/bin/sh");
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        if let Some(path) = path_with_own_binary() {
            cmd.env("PATH", path);
        }
        let child = cmd
            .arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| LabError::node(format!("config {name}"), format!("cannot run sh: {e}")))?;
        let pgid = Pid::from_raw(child.id() as i32)
            .ok_or_else(|| LabError::node(format!("config {name}"), "no process id"))?;
        let mut this = StackCommand { name: name.to_string(), child, pgid, reaper: None };
        if let Some([exe, args @ ..]) = reaper {
            let r = Command::new(exe)
                .args(args)
                .arg("--pgid")
                .arg(pgid.as_raw_nonzero().to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| {
                    LabError::node(
                        format!("config {name}"),
                        format!("cannot start the reaper: {e}"),
                    )
                })?;
            this.reaper = Some(r);
        }
        Ok(this)
    }

    /// The process group id (the shell's pid).
    pub fn pgid(&self) -> u32 {
        self.pgid.as_raw_nonzero().get() as u32
    }

    /// `Some(status)` once the command's shell has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The configuration's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Stops the whole group (SIGTERM, then SIGKILL after `grace`) and reaps the shell.
    pub fn stop(&mut self, grace: Duration) {
        stop_group(self.pgid, grace);
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(mut r) = self.reaper.take() {
            // Its stdin closes: it finds the group gone and exits.
            drop(r.stdin.take());
            let _ = r.wait();
        }
    }
}

impl Drop for StackCommand {
    fn drop(&mut self) {
        self.stop(Duration::from_millis(500));
    }
}

/// The body of `seawall lab-reaper --pgid N`: waits for stdin to close (the lab exited, by
/// any means), then stops the group `pgid`. SIGINT and SIGTERM are ignored while waiting (a
/// Ctrl-C in the terminal reaches the lab, which stops the group itself; the reaper must
/// outlive the lab to cover a lab killed outright).
pub fn run_reaper(pgid: u32) -> Result<(), LabError> {
    let pgid = i32::try_from(pgid)
        .ok()
        .and_then(Pid::from_raw)
        .filter(|p| p.as_raw_nonzero().get() > 1)
        .ok_or_else(|| LabError::bad_input("--pgid", format!("{pgid}: not a process group")))?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        use tokio::io::AsyncReadExt;
        use tokio::signal::unix::{SignalKind, signal};
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 64];
        loop {
            tokio::select! {
                n = stdin.read(&mut buf) => if !matches!(n, Ok(n) if n > 0) { break },
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        Ok::<_, LabError>(())
    })?;
    drop(rt);
    stop_group(pgid, STOP_GRACE);
    Ok(())
}
