//! AWS shared config (`~/.aws/config`): `retry_mode` and `max_attempts` of one profile.
//!
//! Defaults, from the AWS SDKs and Tools Reference Guide ("Retry behavior"): `retry_mode`
//! `standard`; `max_attempts` **3** (one request and two retries) in `standard` and `adaptive`.
//! Both modes spend from the SDK's retry quota (500 tokens, 5 per retry, 1 back per first-try
//! success: see [`crate::model::Budget::AwsQuota`]) and back off with full jitter. `legacy`
//! mode's defaults differ by SDK and it has no quota in most of them: the audit assumes 3
//! attempts and no budget, and says so.
//!
//! The file is INI as the AWS CLI reads it: `[default]` or `[profile NAME]` sections, `key =
//! value` lines, `#` and `;` comments, indented sub-settings (skipped). Unknown keys and
//! sections are ignored, as the SDKs ignore them; a line that is none of these, an unknown
//! `retry_mode`, or a `max_attempts` that is not a positive integer is an error with its line.

use std::path::Path;

use super::{Select, loc};
use crate::error::Error;
use crate::model::{Budget, Place, RetryLayer};

/// The SDKs' default attempts in standard and adaptive mode.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// Parses an AWS config file and returns the SDK layer for `select.profile` (default
/// `default`).
pub fn parse(path: &Path, text: &str, select: &Select) -> Result<Vec<RetryLayer>, Error> {
    let wanted = select.profile.as_deref().unwrap_or("default");
    let mut section: Option<String> = None;
    let mut found_at = None;
    let mut mode: Option<(String, usize)> = None;
    let mut attempts: Option<(u32, usize)> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if raw.starts_with([' ', '\t']) && section.is_some() {
            continue; // a nested sub-setting, e.g. under `s3 =`
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim();
            let profile =
                if name == "default" { Some("default") } else { name.strip_prefix("profile ") };
            section = profile.map(|p| p.trim().to_string());
            if section.as_deref() == Some(wanted) {
                found_at = Some(n);
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(Error::invalid(
                path,
                Some(n),
                "line",
                "`key = value` or a `[section]` header",
            ));
        };
        if section.as_deref() != Some(wanted) {
            continue;
        }
        let value = value.split(" #").next().unwrap_or("").trim();
        match key.trim() {
            "retry_mode" => {
                if !matches!(value, "legacy" | "standard" | "adaptive") {
                    return Err(Error::invalid(
                        path,
                        Some(n),
                        "retry_mode",
                        "legacy, standard or adaptive",
                    ));
                }
                mode = Some((value.to_string(), n));
            }
            "max_attempts" => {
                let v = value.parse::<u32>().ok().filter(|&v| v >= 1).ok_or_else(|| {
                    Error::invalid(path, Some(n), "max_attempts", "a positive integer")
                })?;
                attempts = Some((v, n));
            }
            _ => {}
        }
    }
    if found_at.is_none() && select.profile.is_some() {
        return Err(Error::not_found(path, None, format!("profile \"{wanted}\"")));
    }
    let line = attempts.map(|a| a.1).or(mode.as_ref().map(|m| m.1)).or(found_at).unwrap_or(1);
    let mode_name = mode.map(|m| m.0).unwrap_or_else(|| "standard".to_string());
    let mut l = RetryLayer::new(
        Place::Sdk,
        attempts.map_or(DEFAULT_MAX_ATTEMPTS, |a| a.0),
        loc(path, line),
    );
    l.jitter = true;
    l.implicit = attempts.is_none();
    if mode_name != "legacy" && l.retries() {
        l.budget = Some(Budget::AwsQuota);
    }
    l.note = match (mode_name.as_str(), attempts) {
        ("legacy", _) => {
            Some("legacy mode: SDK-specific defaults, no retry quota; 3 attempts assumed".into())
        }
        (m, None) => Some(format!("AWS SDK default: {m} mode, 3 attempts")),
        _ => None,
    };
    Ok(vec![l])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(p: &str) -> Select {
        Select { profile: Some(p.into()), ..Select::default() }
    }

    #[test]
    fn defaults_profiles_and_errors() {
        let cfg = "[default]\nregion = eu-west-1\n\n[profile orders]\nretry_mode = legacy\nmax_attempts = 5\ns3 =\n  addressing_style = path\n";
        let d = &parse(Path::new("config"), cfg, &Select::default()).unwrap()[0];
        assert_eq!((d.attempts, d.implicit, d.budget), (3, true, Some(Budget::AwsQuota)));
        let o = &parse(Path::new("config"), cfg, &sel("orders")).unwrap()[0];
        assert_eq!((o.attempts, o.budget, o.source.as_str()), (5, None, "config:6"));
        assert!(parse(Path::new("config"), cfg, &sel("nope")).is_err());
        let e =
            parse(Path::new("c"), "[default]\nmax_attempts = 0\n", &Select::default()).unwrap_err();
        assert_eq!(e.line(), Some(2));
        let e = parse(Path::new("c"), "[default]\nnonsense\n", &Select::default()).unwrap_err();
        assert_eq!(e.line(), Some(2));
    }
}
