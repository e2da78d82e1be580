//! A deadline made by a server layer on one clock and read by client layers on another: the
//! instant is never misread. The server `DeadlineLayer` and the client layers each take a clock
//! (`with_clock`); the deadline the server hands to its handler's outgoing calls
//! (`wire::RequestDeadline`, through the task-local scope or copied onto the request) carries
//! its clock's epoch, and a client on another epoch reads its time left on the server's clock.
//! In-process services (`tower::service_fn`) on manual clocks: every figure is exact.
#![cfg(all(feature = "client", feature = "server"))]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use seawall::time::{Clock, CoarseClock, ManualClock, SystemClock};
use seawall_tower::client::FailFastLayer;
use seawall_tower::server::DeadlineLayer;
use seawall_tower::time::TokioClock;
use seawall_tower::wire::RequestDeadline;
use tower::{Layer, ServiceExt};

type Req = http::Request<Bytes>;
type Resp = http::Response<Bytes>;

const MS: Duration = Duration::from_millis(1);

/// How the handler hands its deadline to the outgoing call.
#[derive(Clone, Copy, Debug)]
enum Hand {
    /// The task-local scope the `DeadlineLayer` runs the handler in (nothing copied).
    Scope,
    /// The request's `RequestDeadline` copied onto the outgoing request.
    Copied,
}

/// What the dependency saw: the `Request-Timeout-Ms` of each request (`None` without one).
type Seen = Arc<Mutex<Vec<Option<String>>>>;

/// A server on `server_clock` (`Request-Timeout-Ms: 250` from its caller) whose handler
/// waits `work` on the server's clock (a manual advance, or nothing) and then calls a
/// dependency through a `FailFastLayer` on `client_clock`. Returns the dependency's view and
/// the server's status.
async fn hop<S, C>(
    server_clock: S,
    client_clock: C,
    hand: Hand,
    work: impl Fn() + Clone + Send + Sync + 'static,
) -> (Vec<Option<String>>, u16)
where
    S: Clock + Clone + 'static,
    C: Clock + Clone + 'static,
{
    let seen = Seen::default();
    let s = seen.clone();
    let dep = tower::service_fn(move |req: Req| {
        let h = req.headers().get("request-timeout-ms").map(|v| v.to_str().unwrap().to_owned());
        s.lock().unwrap().push(h);
        std::future::ready(Ok::<_, Infallible>(Resp::new(Bytes::new())))
    });
    let client = FailFastLayer::new().with_clock(client_clock).layer(dep);
    let handler = tower::service_fn(move |req: Req| {
        let (client, work) = (client.clone(), work.clone());
        async move {
            work();
            let mut out = http::Request::get("http://dep/").body(Bytes::new()).unwrap();
            if let Hand::Copied = hand {
                let d = req.extensions().get::<RequestDeadline>().expect("the layer's deadline");
                out.extensions_mut().insert(d.clone());
            }
            let status = match client.oneshot(out).await {
                Ok(r) => r.status(),
                Err(_) => http::StatusCode::SERVICE_UNAVAILABLE,
            };
            Ok::<_, Infallible>(
                http::Response::builder().status(status).body(Bytes::new()).unwrap(),
            )
        }
    });
    let server = DeadlineLayer::new().with_clock(server_clock).layer(handler);
    let req = http::Request::get("/").header("request-timeout-ms", "250").body(Bytes::new());
    let resp = server.oneshot(req.unwrap()).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    (seen, resp.status().as_u16())
}

fn ms(n: u64) -> Vec<Option<String>> {
    vec![Some(n.to_string())]
}

/// Server on one manual clock (an hour in), client on another (at 0): the call is sent with
/// the server's 250 ms left, then 150 ms once the server's clock has moved 100 ms. Whether the
/// deadline came through the scope or copied onto the request. Mutation checked: making
/// `RequestDeadline::for_clock` return the instant whatever the epoch sends `3600250` (the
/// server's instant read at the client's 0); reading the time left on the system clock
/// instead of the clock the deadline keeps sends the hour less the machine's uptime.
#[tokio::test]
async fn a_client_on_another_manual_clock_gets_the_time_left() {
    for hand in [Hand::Scope, Hand::Copied] {
        let server = ManualClock::new();
        server.advance(Duration::from_secs(3600));
        let (seen, status) = hop(server.clone(), ManualClock::new(), hand, || ()).await;
        assert_eq!((seen, status), (ms(250), 200), "{hand:?}");
        let worked = server.clone();
        let (seen, _) =
            hop(server, ManualClock::new(), hand, move || worked.advance(100 * MS)).await;
        assert_eq!(seen, ms(150), "{hand:?}");
    }
}

/// Server on a manual clock at 0, client on the system clock (whose instants count from the
/// machine's boot): the call goes out with 250 ms left. Mutation checked: without the epoch
/// check the client reads "0 + 250 ms" as long past, sends nothing and answers 503
/// (the layer gave up: deadline too close).
#[tokio::test]
async fn a_system_clock_client_under_a_manual_clock_server_gets_the_time_left() {
    for hand in [Hand::Scope, Hand::Copied] {
        let (seen, status) = hop(ManualClock::new(), SystemClock, hand, || ()).await;
        assert_eq!((seen, status), (ms(250), 200), "{hand:?}");
    }
}

/// And the other way round: a system-clock server (instants since boot) under a client on a
/// manual clock at 0. Mutation checked: without the epoch check the client sends the
/// machine's uptime plus 250 ms as its time left.
#[tokio::test]
async fn a_manual_clock_client_under_a_system_clock_server_gets_the_time_left() {
    for hand in [Hand::Scope, Hand::Copied] {
        let (seen, status) = hop(SystemClock, ManualClock::new(), hand, || ()).await;
        assert_eq!(status, 200);
        let left: u64 = seen[0].as_deref().unwrap().parse().unwrap();
        // Real time passed between the server's read and the client's: a little under 250.
        assert!(left <= 250 && left > 150, "{hand:?}: {left} ms");
    }
}

/// A client on a paused runtime's clock (`TokioClock`, an hour of virtual time ahead of the
/// machine's) under a server on the system clock: their instants are counted alike but no
/// longer agree, and nothing tokio makes public says so; the call still goes out with the
/// server's time left. Mutation checked: without the epoch check the client reads the
/// server's deadline an hour late, sends nothing and answers 503.
#[tokio::test(start_paused = true)]
async fn a_paused_tokio_clock_client_under_a_system_clock_server_gets_the_time_left() {
    tokio::time::advance(Duration::from_secs(3600)).await;
    for hand in [Hand::Scope, Hand::Copied] {
        let (seen, status) = hop(SystemClock, TokioClock, hand, || ()).await;
        assert_eq!(status, 200, "{hand:?}");
        let left: u64 = seen[0].as_deref().unwrap().parse().unwrap();
        assert!(left <= 250 && left > 150, "{hand:?}: {left} ms");
    }
}

/// One clock on both sides, as before: a clone of the server's manual clock sees the server's
/// instant itself, time passing on the shared clock counting for both.
#[tokio::test]
async fn the_same_clock_or_a_clone_reads_the_instant_itself() {
    for hand in [Hand::Scope, Hand::Copied] {
        let server = ManualClock::new();
        server.advance(Duration::from_secs(3600));
        let (seen, status) = hop(server.clone(), server.clone(), hand, || ()).await;
        assert_eq!((seen, status), (ms(250), 200), "{hand:?}");
        let worked = server.clone();
        let work = move || worked.advance(100 * MS);
        let (seen, _) = hop(server.clone(), server, hand, work).await;
        assert_eq!(seen, ms(150), "{hand:?}");
    }
}

/// `SystemClock` and `CoarseClock` are one epoch: a coarse client under a system server (and
/// the other way round) reads the instant itself, within the coarse clock's lag: up to two
/// ticks (as `seawall::time`'s own coarse-clock test allows: the kernel's tick lands late at
/// times) plus the header's rounding up to a whole millisecond. One tick alone read 255 ms at a
/// 4 ms tick once in CI.
#[tokio::test]
async fn system_and_coarse_clocks_share_the_deadline() {
    let tick = u64::try_from(CoarseClock::resolution().as_millis()).unwrap();
    for hand in [Hand::Scope, Hand::Copied] {
        let (seen, _) = hop(SystemClock, CoarseClock, hand, || ()).await;
        let left: u64 = seen[0].as_deref().unwrap().parse().unwrap();
        assert!(left <= 250 + 2 * tick + 1 && left > 150, "{hand:?}: {left} ms");
        let (seen, _) = hop(CoarseClock, SystemClock, hand, || ()).await;
        let left: u64 = seen[0].as_deref().unwrap().parse().unwrap();
        assert!(left <= 250 && left > 150, "{hand:?}: {left} ms");
    }
}

/// The server layers below `DeadlineLayer` read the deadline on their own clocks too: a
/// `ShedLayer` an hour into its manual clock admits a request whose deadline, made on another
/// manual clock at 0, has 250 ms left. Mutation checked: `for_clock` returning the instant
/// whatever the epoch makes it refuse the request at once as expired (504).
#[tokio::test]
async fn the_shed_layer_reads_a_foreign_deadline_as_its_time_left() {
    use seawall_tower::server::ShedLayer;
    let shed_clock = ManualClock::new();
    shed_clock.advance(Duration::from_secs(3600));
    let ok = tower::service_fn(|_req: Req| {
        std::future::ready(Ok::<_, Infallible>(Resp::new(Bytes::new())))
    });
    let svc =
        ShedLayer::new(std::num::NonZeroUsize::new(1).unwrap()).with_clock(shed_clock).layer(ok);
    let mut req = http::Request::get("/").body(Bytes::new()).unwrap();
    req.extensions_mut().insert(RequestDeadline::after(&ManualClock::new(), 250 * MS));
    assert_eq!(svc.oneshot(req).await.unwrap().status(), 200);
}
