//! The percentage knobs' admin endpoint, shared by the client's retry switch and the server's
//! admission knob: read, switch off, ramp back, or set a percentage.
//!
//! Both knobs are a [`Control`]: one atomic percentage with a kill switch and the staged ramp
//! 10 → 25 → 50 → 100 % ([`seawall::control::RAMP`]). Only the name under which the percentage
//! is reported differs (`retry_percent`, `admit_percent`), so the request handling lives here
//! once.
//!
//! | request | effect |
//! |---|---|
//! | `GET` | `{"<field>":N}` |
//! | `POST ?action=off` | 0 % from the next decision on |
//! | `POST ?action=ramp` | the next stage of the ramp |
//! | `POST ?action=on` | 100 % at once (prefer `ramp`) |
//! | `POST ?percent=N` | exactly N % (0–100) |

use http::{Method, Request, Response, StatusCode};
use seawall::control::Control;

fn reply(status: StatusCode, body: String) -> Response<String> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r.headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    r
}

/// Serves the admin endpoint for `control`, reporting its percentage as `field`.
pub(crate) fn percent_response<B>(
    control: &Control,
    req: &Request<B>,
    field: &'static str,
) -> Response<String> {
    let bad = |why: &str| reply(StatusCode::BAD_REQUEST, format!("{{\"error\":\"{why}\"}}"));
    match *req.method() {
        Method::GET | Method::HEAD => {}
        Method::POST | Method::PUT => {
            let query = req.uri().query().unwrap_or("");
            let mut done = false;
            for (k, v) in query.split('&').filter_map(|kv| kv.split_once('=')) {
                match (k, v) {
                    ("action", "off") => control.disable(),
                    ("action", "on") => control.enable(),
                    ("action", "ramp") => {
                        control.ramp_up();
                    }
                    ("percent", p) => match p.parse::<u8>().ok().map(|p| control.set_percent(p)) {
                        Some(Ok(())) => {}
                        _ => return bad("percent must be an integer in [0, 100]"),
                    },
                    _ => return bad("expected action=off|on|ramp or percent=N"),
                }
                done = true;
            }
            if !done {
                return bad("expected action=off|on|ramp or percent=N");
            }
        }
        _ => return reply(StatusCode::METHOD_NOT_ALLOWED, "{}".into()),
    }
    reply(StatusCode::OK, format!("{{\"{field}\":{}}}", control.percent()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(c: &Control, method: &str, uri: &str) -> (u16, String) {
        let req = Request::builder().method(method).uri(uri).body(()).unwrap();
        let r = percent_response(c, &req, "p");
        (r.status().as_u16(), r.into_body())
    }

    #[test]
    fn read_switch_off_ramp_and_set() {
        let c = Control::new();
        assert_eq!(call(&c, "GET", "/"), (200, r#"{"p":100}"#.into()));
        assert_eq!(call(&c, "POST", "/?action=off").1, r#"{"p":0}"#);
        assert_eq!(call(&c, "POST", "/?action=ramp").1, r#"{"p":10}"#);
        assert_eq!(call(&c, "POST", "/?percent=50").1, r#"{"p":50}"#);
        assert_eq!(call(&c, "POST", "/?percent=101").0, 400);
        assert_eq!(call(&c, "POST", "/?percent=-1").0, 400);
        assert_eq!(call(&c, "POST", "/?nonsense=1").0, 400);
        assert_eq!(call(&c, "POST", "/").0, 400);
        assert_eq!(call(&c, "DELETE", "/").0, 405);
        assert_eq!(c.percent(), 50);
    }
}
