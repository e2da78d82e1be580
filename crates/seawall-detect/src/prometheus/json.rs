//! Strict reading of the Prometheus HTTP API's JSON answers (`/api/v1/query`,
//! `/api/v1/query_range`).
//!
//! The envelope is `{"status": "success" | "error", "data": {"resultType": …, "result": …},
//! "errorType": …, "error": …, "warnings": […]}`; sample values are JSON **strings** (`"1.5"`,
//! `"NaN"`, `"+Inf"`) beside a float timestamp. Anything else — a login page, a Grafana proxy's
//! HTML, a bare number where a string belongs — is an error naming what was wrong, never a
//! silently wrong number.

use serde_json::Value;

use super::ApiError;

/// Most series one answer may hold (a `sum(...)` gives one; a typo'd selector may give thousands).
pub const MAX_SERIES: usize = 10_000;
/// Most points one range answer may hold, all series together (Prometheus's own cap is 11,000
/// points per series).
pub const MAX_POINTS: usize = 1_000_000;

/// One series of an answer: its labels and its points (one for an instant query).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The series' labels, sorted by name (`__name__` dropped by aggregation in most queries).
    pub labels: Vec<(String, String)>,
    /// `(unix seconds, value)` in time order; the value may be NaN or infinite.
    pub points: Vec<(f64, f64)>,
}

/// A successful answer's data.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The series (a scalar answer is one series without labels).
    pub series: Vec<Series>,
    /// Prometheus's warnings, if any (e.g. a query over too many series).
    pub warnings: Vec<String>,
}

/// Parses a response body; `want_matrix` is true for range queries.
pub fn parse_answer(body: &str, want_matrix: bool) -> Result<Answer, ApiError> {
    let trimmed = body.trim_start();
    if trimmed.starts_with('<') {
        return Err(ApiError::NotJson(
            "the server answered HTML, not JSON: is the URL the Prometheus server itself (not \
             Grafana, a login page or a proxy's error page)?"
                .into(),
        ));
    }
    let v: Value = serde_json::from_str(trimmed).map_err(|e| {
        ApiError::NotJson(format!("the answer is not JSON ({e}): is the URL a Prometheus server?"))
    })?;
    let bad = |m: &str| ApiError::Malformed(m.to_string());
    let obj = v.as_object().ok_or_else(|| bad("the answer is not a JSON object"))?;
    let warnings = match obj.get("warnings") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.iter().filter_map(|w| w.as_str().map(str::to_string)).collect(),
        Some(_) => return Err(bad("`warnings` is not a list")),
    };
    match obj.get("status").and_then(Value::as_str) {
        Some("success") => {}
        Some("error") => {
            let s = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            return Err(ApiError::Prometheus { error_type: s("errorType"), error: s("error") });
        }
        _ => return Err(bad("`status` is neither \"success\" nor \"error\"")),
    }
    let data = obj.get("data").and_then(Value::as_object).ok_or_else(|| bad("no `data` object"))?;
    let kind =
        data.get("resultType").and_then(Value::as_str).ok_or_else(|| bad("no resultType"))?;
    let result = data.get("result").ok_or_else(|| bad("no `result`"))?;
    let series = match (kind, want_matrix) {
        ("vector", false) => {
            let items = list(result, "result")?;
            items.iter().map(|s| series(s, "value", false)).collect::<Result<Vec<_>, _>>()?
        }
        ("scalar", false) => vec![Series { labels: Vec::new(), points: vec![point(result)?] }],
        ("matrix", true) => {
            let items = list(result, "result")?;
            let mut total = 0usize;
            let mut out = Vec::with_capacity(items.len());
            for s in items {
                let s = series(s, "values", true)?;
                total += s.points.len();
                if total > MAX_POINTS {
                    return Err(ApiError::TooLarge(format!("more than {MAX_POINTS} points")));
                }
                out.push(s);
            }
            out
        }
        (other, _) => {
            let want = if want_matrix { "matrix" } else { "vector or scalar" };
            return Err(ApiError::Malformed(format!(
                "resultType {other:?} where a {want} was expected (a string result, or a range \
                 selector like x[5m] in an instant query?)"
            )));
        }
    };
    Ok(Answer { series, warnings })
}

fn list<'a>(v: &'a Value, what: &str) -> Result<&'a Vec<Value>, ApiError> {
    let items =
        v.as_array().ok_or_else(|| ApiError::Malformed(format!("`{what}` is not a list")))?;
    if items.len() > MAX_SERIES {
        return Err(ApiError::TooLarge(format!("{} series (at most {MAX_SERIES})", items.len())));
    }
    Ok(items)
}

fn series(v: &Value, key: &str, many: bool) -> Result<Series, ApiError> {
    let bad = |m: String| ApiError::Malformed(m);
    let obj = v.as_object().ok_or_else(|| bad("a series is not an object".into()))?;
    let mut labels = Vec::new();
    match obj.get("metric") {
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let v = v.as_str().ok_or_else(|| bad(format!("label {k:?} is not a string")))?;
                labels.push((k.clone(), v.to_string()));
            }
        }
        _ => return Err(bad("a series has no `metric` object".into())),
    }
    labels.sort();
    let points = if many {
        list(obj.get(key).ok_or_else(|| bad(format!("a series has no `{key}`")))?, key)?
            .iter()
            .map(point)
            .collect::<Result<Vec<_>, _>>()?
    } else {
        vec![point(obj.get(key).ok_or_else(|| bad(format!("a series has no `{key}`")))?)?]
    };
    if points.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(bad("a series' timestamps are not increasing".into()));
    }
    Ok(Series { labels, points })
}

/// `[1712345678.123, "42.5"]`: a float timestamp and a value in a string.
fn point(v: &Value) -> Result<(f64, f64), ApiError> {
    let bad = |m: &str| ApiError::Malformed(m.to_string());
    let pair =
        v.as_array().filter(|a| a.len() == 2).ok_or_else(|| bad("a point is not [t, \"v\"]"))?;
    let t = pair[0]
        .as_f64()
        .filter(|t| t.is_finite())
        .ok_or_else(|| bad("a timestamp is not a number"))?;
    let s =
        pair[1].as_str().ok_or_else(|| bad("a value is not a string, as the API sends them"))?;
    let value = parse_value(s)
        .ok_or_else(|| ApiError::Malformed(format!("value {s:?} is not a number")))?;
    Ok((t, value))
}

/// The API's number strings: Go's `strconv.FormatFloat` output, plus `NaN`, `+Inf`, `-Inf`.
fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) => {
            s.parse().ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_with_nan_and_inf() {
        let a = parse_answer(
            r#"{"status":"success","data":{"resultType":"vector","result":[
              {"metric":{"job":"edge"},"value":[1700000000.5,"12.5"]},
              {"metric":{},"value":[1700000000.5,"NaN"]},
              {"metric":{},"value":[1700000000.5,"+Inf"]}]}}"#,
            false,
        )
        .unwrap();
        assert_eq!(a.series.len(), 3);
        assert_eq!(a.series[0].labels, vec![("job".into(), "edge".into())]);
        assert_eq!(a.series[0].points, vec![(1700000000.5, 12.5)]);
        assert!(a.series[1].points[0].1.is_nan());
        assert_eq!(a.series[2].points[0].1, f64::INFINITY);
    }

    #[test]
    fn matrix_and_scalar() {
        let a = parse_answer(
            r#"{"status":"success","data":{"resultType":"matrix","result":[
              {"metric":{},"values":[[1,"1"],[2,"2e0"]]}]},"warnings":["w"]}"#,
            true,
        )
        .unwrap();
        assert_eq!(a.series[0].points, vec![(1.0, 1.0), (2.0, 2.0)]);
        assert_eq!(a.warnings, vec!["w".to_string()]);
        let s = parse_answer(
            r#"{"status":"success","data":{"resultType":"scalar","result":[3,"7"]}}"#,
            false,
        )
        .unwrap();
        assert_eq!(s.series[0].points, vec![(3.0, 7.0)]);
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = parse_answer("<!doctype html><html>Grafana</html>", false).unwrap_err();
        assert!(matches!(e, ApiError::NotJson(_)) && e.to_string().contains("HTML"), "{e}");
        let e = parse_answer(
            r#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#,
            false,
        )
        .unwrap_err();
        assert_eq!(
            e,
            ApiError::Prometheus {
                error_type: "bad_data".into(),
                error: "parse error at char 5".into()
            }
        );
        for bad in [
            r#"{"status":"success"}"#,
            r#"{"status":"ok","data":{}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,2]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"inf"]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"1"]}]}}"#,
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[2,"1"],[1,"1"]]}]}}"#,
            r#"{"status":"success","data":{"resultType":"string","result":[1,"x"]}}"#,
            r#"[1,2]"#,
            "",
        ] {
            let want_matrix = bad.contains("matrix");
            assert!(parse_answer(bad, want_matrix).is_err(), "accepted {bad}");
        }
        // A matrix where an instant answer was expected is an error too.
        assert!(
            parse_answer(
                r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
                false
            )
            .is_err()
        );
    }
}
