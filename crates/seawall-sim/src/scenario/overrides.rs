//! `--set KEY=VALUE`: a dotted path into the scenario's TOML tree, before it is deserialized, so
//! an override is checked by exactly the same schema and validation as the file.
//!
//! Path segments name table keys; in an array of tables (`tier`, `fault`) a segment is either
//! an index (`tier.0.workers`) or, for tiers, the tier's name (`tier.db.workers`). VALUE is read
//! as a TOML value (`140`, `true`, `"hold"`, `[1, 2]`); anything that is not one is a string.

use toml::{Table, Value};

use crate::error::Error;

pub(super) fn apply(root: &mut Table, given: &str) -> Result<(), Error> {
    // Walk a `Value` so every level is handled alike, then put the table back.
    let mut tree = Value::Table(std::mem::take(root));
    let result = set(&mut tree, given);
    if let Value::Table(t) = tree {
        *root = t;
    }
    result
}

fn set(tree: &mut Value, given: &str) -> Result<(), Error> {
    let fail = |m: String| Error::Override { given: given.to_string(), message: m };
    let (key, raw) = given
        .split_once('=')
        .ok_or_else(|| fail("expected KEY=VALUE, e.g. edge.rate=140".into()))?;
    let value = parse_value(raw.trim());
    let parts: Vec<&str> = key.trim().split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(fail("expected a dotted path such as edge.rate".into()));
    }
    let (last, path) = parts.split_last().expect("split yields one part at least");
    let mut cur: &mut Value = tree;
    for (i, seg) in path.iter().enumerate() {
        let here = parts[..=i].join(".");
        cur = match cur {
            Value::Table(t) => {
                t.entry(seg.to_string()).or_insert_with(|| Value::Table(Table::new()))
            }
            Value::Array(a) => {
                let idx = match seg.parse::<usize>() {
                    Ok(n) => Some(n),
                    Err(_) => {
                        a.iter().position(|v| v.get("name").and_then(Value::as_str) == Some(seg))
                    }
                };
                let len = a.len();
                idx.and_then(|n| a.get_mut(n))
                    .ok_or_else(|| fail(format!("`{here}`: no element (there are {len})")))?
            }
            _ => return Err(fail(format!("`{}` is not a table", parts[..i].join(".")))),
        };
    }
    match cur {
        Value::Table(t) => {
            t.insert(last.to_string(), value);
            Ok(())
        }
        // `fault.duration_s` where `fault` is a list: say how to name one of its elements.
        Value::Array(a) => {
            let (here, len) = (path.join("."), a.len());
            Err(fail(format!("`{here}` is a list of {len}: name one, e.g. `{here}.0.{last}`")))
        }
        _ => Err(fail(format!("`{}` is not a table", path.join(".")))),
    }
}

fn parse_value(raw: &str) -> Value {
    toml::from_str::<Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.to_string()))
}
