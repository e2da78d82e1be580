//! What the live tests share: a lab stack run in-process with a tool beside it.

use seawall_lab::run::{Measured, StackInfo, run_stack};
use seawall_lab::{LabParams, Launcher, Stack};

/// Runs `stack` and, once it is up, `tool` (blocking) with its node URLs, side by side.
pub(crate) async fn with_running_lab<T: Send + 'static>(
    params: &LabParams,
    stack: Stack,
    tool: impl FnOnce(StackInfo) -> T + Send + 'static,
) -> (Measured, T) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut tx = Some(tx);
    let mut announce = move |info: &StackInfo| {
        if let Some(t) = tx.take() {
            let _ = t.send(info.clone());
        }
    };
    let lab = run_stack(params, stack, &Launcher::InProcess, None, &mut announce);
    let tool = async move {
        let info = rx.await.expect("the stack came up");
        tokio::task::spawn_blocking(move || tool(info)).await.expect("the tool ran")
    };
    let (m, t) = tokio::join!(lab, tool);
    (m.expect("the lab ran"), t)
}
