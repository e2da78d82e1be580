//! What the client benches share: tower's retry policy with its budget, the baseline every
//! seawall figure is a ratio against.

use std::future::{Ready, ready};
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use tower::retry::budget::{Budget, TpsBudget};

/// tower's retry with the budget it ships: retry 5xx while the budget allows.
#[derive(Clone)]
pub(crate) struct TowerPolicy(pub(crate) Arc<TpsBudget>);

impl<E> tower::retry::Policy<Request<Bytes>, Response<Bytes>, E> for TowerPolicy {
    type Future = Ready<()>;

    fn retry(
        &mut self,
        _req: &mut Request<Bytes>,
        result: &mut Result<Response<Bytes>, E>,
    ) -> Option<Self::Future> {
        match result {
            Ok(r) if !r.status().is_server_error() => {
                self.0.deposit();
                None
            }
            _ => self.0.withdraw().then(|| ready(())),
        }
    }

    fn clone_request(&mut self, req: &Request<Bytes>) -> Option<Request<Bytes>> {
        TowerPolicy::clone_request(req)
    }
}

impl TowerPolicy {
    /// The copy tower's retry keeps to send again: method, URI and headers.
    pub(crate) fn clone_request(req: &Request<Bytes>) -> Option<Request<Bytes>> {
        let mut r = Request::new(req.body().clone());
        *r.method_mut() = req.method().clone();
        *r.uri_mut() = req.uri().clone();
        *r.headers_mut() = req.headers().clone();
        Some(r)
    }
}
