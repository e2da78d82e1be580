//! A strict, bounded parser for the Prometheus / OpenMetrics text exposition format.
//!
//! A scrape target is untrusted input, like any value read from the network: a broken or hostile
//! page must produce an error naming the line, never a panic, an unbounded allocation or a silently
//! wrong number. So the page is capped in size, lines and labels; names must be valid metric and
//! label names; label values must be properly quoted and escaped; a value must be a number (`NaN`
//! and `±Inf` are numbers here, as in the format). Comments (`# HELP`, `# TYPE`, `# UNIT`, `# EOF`)
//! are skipped; a trailing timestamp and an OpenMetrics exemplar (`# {…} value`) are accepted and
//! ignored.

use std::fmt;

/// Largest page accepted, in bytes (a large service exports a few hundred kilobytes).
pub const MAX_BYTES: usize = 4 << 20;
/// Most samples accepted from one page.
pub const MAX_SAMPLES: usize = 100_000;
/// Most labels on one sample.
pub const MAX_LABELS: usize = 64;

/// One sample line: `name{label="value",…} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct PromSample {
    /// The metric name, e.g. `seawall_client_call_started_total`.
    pub name: String,
    /// The labels, in page order.
    pub labels: Vec<(String, String)>,
    /// The value (may be `NaN` or infinite, as the format allows).
    pub value: f64,
}

impl PromSample {
    /// The value of label `key`, if present.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// Why a page could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// The page is larger than [`MAX_BYTES`] or holds more than [`MAX_SAMPLES`] samples.
    TooLarge,
    /// A line is malformed.
    Line {
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        message: String,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::TooLarge => {
                write!(f, "metrics page larger than {MAX_BYTES} bytes or {MAX_SAMPLES} samples")
            }
            ParseError::Line { line, message } => write!(f, "line {line}: {message}"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Parses a whole page.
pub fn parse(text: &str) -> Result<Vec<PromSample>, ParseError> {
    if text.len() > MAX_BYTES {
        return Err(ParseError::TooLarge);
    }
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if out.len() >= MAX_SAMPLES {
            return Err(ParseError::TooLarge);
        }
        out.push(parse_line(line).map_err(|message| ParseError::Line { line: i + 1, message })?);
    }
    Ok(out)
}

fn is_name(s: &str, colons: bool) -> bool {
    let mut chars = s.chars();
    let ok_first = |c: char| c.is_ascii_alphabetic() || c == '_' || (colons && c == ':');
    chars.next().is_some_and(ok_first) && chars.all(|c| ok_first(c) || c.is_ascii_digit())
}

fn parse_line(line: &str) -> Result<PromSample, String> {
    let name_end = line.find(['{', ' ', '\t']).unwrap_or(line.len());
    let name = &line[..name_end];
    if !is_name(name, true) {
        return Err(format!("invalid metric name {:?}", truncate(name)));
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        rest = parse_labels(r, &mut labels)?;
    }
    if !rest.starts_with([' ', '\t']) {
        return Err("expected a space before the value".into());
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    // value [timestamp] [# exemplar]
    let (main, _exemplar) = match rest.find(" # ") {
        Some(i) => (&rest[..i], Some(&rest[i..])),
        None => (rest, None),
    };
    let mut fields = main.split_ascii_whitespace();
    let value = fields.next().ok_or("missing value")?;
    let value = parse_value(value).ok_or_else(|| format!("invalid value {:?}", truncate(value)))?;
    if let Some(ts) = fields.next()
        && ts.parse::<f64>().map_or(true, |t| !t.is_finite())
    {
        return Err(format!("invalid timestamp {:?}", truncate(ts)));
    }
    if fields.next().is_some() {
        return Err("unexpected text after the timestamp".into());
    }
    Ok(PromSample { name: name.to_string(), labels, value })
}

/// Parses `key="value",…}` and returns what follows the closing brace.
fn parse_labels<'a>(mut r: &'a str, labels: &mut Vec<(String, String)>) -> Result<&'a str, String> {
    loop {
        r = r.trim_start_matches([' ', '\t']);
        if let Some(after) = r.strip_prefix('}') {
            return Ok(after);
        }
        if labels.len() >= MAX_LABELS {
            return Err(format!("more than {MAX_LABELS} labels"));
        }
        let eq = r.find('=').ok_or("expected label=\"value\"")?;
        let key = r[..eq].trim_end();
        if !is_name(key, false) {
            return Err(format!("invalid label name {:?}", truncate(key)));
        }
        r = r[eq + 1..].trim_start().strip_prefix('"').ok_or("label value must be quoted")?;
        let mut value = String::new();
        let mut chars = r.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err("unterminated label value".into()),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    _ => return Err("invalid escape in label value".into()),
                },
                Some((_, c)) => value.push(c),
            }
        };
        labels.push((key.to_string(), value));
        r = r[end + 1..].trim_start_matches([' ', '\t']);
        if let Some(after) = r.strip_prefix(',') {
            r = after;
        } else if !r.starts_with('}') {
            return Err("expected , or } after a label".into());
        }
    }
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        // Rust also accepts "inf", "infinity" and "nan" in any case: the format does not.
        _ if s.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) => s.parse().ok(),
        _ => None,
    }
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(40) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests;
