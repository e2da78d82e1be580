use super::*;
use bytes::Bytes;
use seawall::time::ManualClock;

const S: Duration = Duration::from_secs(1);

fn key(k: &str) -> StoreKey {
    StoreKey { scope: "s".into(), key: k.into() }
}

fn now<F: std::future::Future>(f: F) -> F::Output {
    // Every MemoryStore future is ready at once.
    let waker = std::task::Waker::noop();
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut std::task::Context::from_waker(waker)) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => unreachable!("memory store futures are ready"),
    }
}

#[test]
fn lifecycle_and_crash_guarantee_on_virtual_time() {
    let clock = ManualClock::new();
    let s = MemoryStore::with_clock(10, clock.clone());
    let (fp, other) = ([1; 32], [2; 32]);
    assert_eq!(now(s.begin(&key("a"), &fp, S, 60 * S)).unwrap(), Begin::Execute);
    assert_eq!(now(s.begin(&key("a"), &fp, S, 60 * S)).unwrap(), Begin::InFlight);
    assert_eq!(now(s.begin(&key("a"), &other, S, 60 * S)).unwrap(), Begin::Mismatch);
    // "Crash": never completed. After the lease: outcome unknown, never a second execution.
    clock.advance(2 * S);
    assert_eq!(now(s.begin(&key("a"), &fp, S, 60 * S)).unwrap(), Begin::Unknown);
    // After the TTL the key is free again.
    clock.advance(60 * S);
    assert_eq!(now(s.begin(&key("a"), &fp, S, 60 * S)).unwrap(), Begin::Execute);
    let r = StoredResponse { status: 201, headers: vec![], body: Bytes::from_static(b"ok") };
    now(s.complete(&key("a"), &fp, &r, 60 * S)).unwrap();
    assert_eq!(now(s.begin(&key("a"), &fp, S, 60 * S)).unwrap(), Begin::Done(r));
}

#[test]
fn full_refuses_new_keys_and_never_evicts_within_the_ttl() {
    let clock = ManualClock::new();
    let s = MemoryStore::with_clock(2, clock.clone());
    let fp = [1; 32];
    let r = StoredResponse { status: 200, headers: vec![], body: Bytes::new() };
    for k in ["a", "b"] {
        assert_eq!(now(s.begin(&key(k), &fp, S, 60 * S)).unwrap(), Begin::Execute);
        now(s.complete(&key(k), &fp, &r, 60 * S)).unwrap();
    }
    assert!(matches!(now(s.begin(&key("c"), &fp, S, 60 * S)), Err(StoreError::Full)));
    // The stored keys are still answered (replayed), not evicted.
    assert_eq!(now(s.begin(&key("a"), &fp, S, 60 * S)).unwrap(), Begin::Done(r.clone()));
    // Once the TTL has passed, room again.
    clock.advance(61 * S);
    assert_eq!(now(s.begin(&key("c"), &fp, S, 60 * S)).unwrap(), Begin::Execute);
}

#[test]
fn the_pending_pool_is_bounded_and_freed_by_release_and_abandon() {
    let s = MemoryStore::with_clock(100, ManualClock::new()).max_pending(2);
    let fp = [1; 32];
    assert_eq!(now(s.begin(&key("a"), &fp, S, 60 * S)).unwrap(), Begin::Execute);
    assert_eq!(now(s.begin(&key("b"), &fp, S, 60 * S)).unwrap(), Begin::Execute);
    assert!(matches!(now(s.begin(&key("c"), &fp, S, 60 * S)), Err(StoreError::PendingFull)));
    now(s.release(&key("a"), &fp)).unwrap();
    now(s.abandon(&key("b"), &fp)).unwrap();
    assert_eq!(s.stats(), MemoryStats { pending: 0, records: 1 });
    // Abandoned: outcome unknown at once (no lease to wait out), never executed again.
    assert_eq!(now(s.begin(&key("b"), &fp, S, 60 * S)).unwrap(), Begin::Unknown);
    assert_eq!(now(s.begin(&key("a"), &fp, S, 60 * S)).unwrap(), Begin::Execute, "released");
    assert_eq!(now(s.begin(&key("c"), &fp, S, 60 * S)).unwrap(), Begin::Execute);
}
