//! The admin bearer token, read the same way by every command that takes one.

use std::path::Path;

/// The token from `literal` (`--admin-token`), else the file at `file` (`--admin-token-file`),
/// else `$SEAWALL_ADMIN_TOKEN`; surrounding whitespace (a file's final newline) dropped.
pub(crate) fn admin_token(
    literal: Option<&str>,
    file: Option<&Path>,
) -> anyhow::Result<Option<String>> {
    if let Some(t) = literal {
        return Ok(Some(t.trim().to_string()));
    }
    if let Some(p) = file {
        let meta = std::fs::metadata(p)
            .map_err(|e| anyhow::anyhow!("--admin-token-file {}: {e}", p.display()))?;
        // A token is short; anything larger is not a token file.
        anyhow::ensure!(meta.len() <= 4096, "--admin-token-file {}: over 4 KiB", p.display());
        let t = std::fs::read_to_string(p)
            .map_err(|e| anyhow::anyhow!("--admin-token-file {}: {e}", p.display()))?;
        return Ok(Some(t.trim().to_string()));
    }
    Ok(std::env::var("SEAWALL_ADMIN_TOKEN").ok().map(|t| t.trim().to_string()))
}
