//! The admin endpoints' query strings (seawall-tower's `admission_response`: `?percent=N`,
//! `?action=off|on|ramp`): never panic; every answer is 200 with the percentage in `0..=100`,
//! or 400 with nothing changed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall::control::Control;
use seawall_tower::admin::AdminAuth;
use seawall_tower::server::admission_response;

fuzz_target!(|data: &[u8]| {
    let Ok(query) = std::str::from_utf8(data) else { return };
    let Ok(uri) = format!("/admin/admission?{query}").parse::<http::Uri>() else { return };
    let control = Control::new();
    control.set_percent(40).expect("40 is a percentage");
    let req = http::Request::post(uri).body(()).expect("a request");
    let res = admission_response(&control, &AdminAuth::unauthenticated(), &req);
    match res.status().as_u16() {
        200 => {
            let p = control.percent();
            assert!(p <= 100, "{p}");
            assert_eq!(res.body(), &format!("{{\"admit_percent\":{p}}}"));
        }
        400 => {}
        s => panic!("status {s} for {query:?}"),
    }
});
