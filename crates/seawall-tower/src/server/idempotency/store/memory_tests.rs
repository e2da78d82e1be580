use super::*;
use bytes::Bytes;
use seawall::time::ManualClock;

const S: Duration = Duration::from_secs(1);
const O: Owner = Owner::from_bytes([7; 16]);

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
    assert_eq!(now(s.begin(&key("a"), &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
    assert_eq!(now(s.begin(&key("a"), &fp, &O, S, 60 * S)).unwrap(), Begin::InFlight);
    assert_eq!(now(s.begin(&key("a"), &other, &O, S, 60 * S)).unwrap(), Begin::Mismatch);
    // "Crash": never completed. After the lease: outcome unknown, never a second execution.
    clock.advance(2 * S);
    assert_eq!(now(s.begin(&key("a"), &fp, &O, S, 60 * S)).unwrap(), Begin::Unknown);
    // After the TTL the key is free again.
    clock.advance(60 * S);
    assert_eq!(now(s.begin(&key("a"), &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
    let r = StoredResponse { status: 201, headers: vec![], body: Bytes::from_static(b"ok") };
    now(s.complete(&key("a"), &O, &r, 60 * S)).unwrap();
    assert_eq!(now(s.begin(&key("a"), &fp, &O, S, 60 * S)).unwrap(), Begin::Done(r));
}

#[test]
fn full_refuses_new_keys_and_never_evicts_within_the_ttl() {
    let clock = ManualClock::new();
    let s = MemoryStore::with_clock(2, clock.clone()).scope_share(1.0);
    let fp = [1; 32];
    let r = StoredResponse { status: 200, headers: vec![], body: Bytes::new() };
    for k in ["a", "b"] {
        assert_eq!(now(s.begin(&key(k), &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
        now(s.complete(&key(k), &O, &r, 60 * S)).unwrap();
    }
    assert!(matches!(now(s.begin(&key("c"), &fp, &O, S, 60 * S)), Err(StoreError::Full { .. })));
    // The stored keys are still answered (replayed), not evicted.
    assert_eq!(now(s.begin(&key("a"), &fp, &O, S, 60 * S)).unwrap(), Begin::Done(r.clone()));
    // Once the TTL has passed, room again.
    clock.advance(61 * S);
    assert_eq!(now(s.begin(&key("c"), &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
}

#[test]
fn the_pending_pool_is_bounded_and_freed_by_release_and_abandon() {
    let s = MemoryStore::with_clock(100, ManualClock::new()).max_pending(2);
    let fp = [1; 32];
    assert_eq!(now(s.begin(&key("a"), &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
    assert_eq!(now(s.begin(&key("b"), &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
    assert!(matches!(now(s.begin(&key("c"), &fp, &O, S, 60 * S)), Err(StoreError::PendingFull)));
    now(s.release(&key("a"), &O)).unwrap();
    now(s.abandon(&key("b"), &O)).unwrap();
    assert_eq!(s.stats(), MemoryStats { pending: 0, records: 1, unknown: 1, scopes: 1 });
    // Abandoned: outcome unknown at once (no lease to wait out), never executed again.
    assert_eq!(now(s.begin(&key("b"), &fp, &O, S, 60 * S)).unwrap(), Begin::Unknown);
    assert_eq!(now(s.begin(&key("a"), &fp, &O, S, 60 * S)).unwrap(), Begin::Execute, "released");
    assert_eq!(now(s.begin(&key("c"), &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
}

#[test]
fn only_the_owner_settles_its_marker() {
    let s = MemoryStore::with_clock(100, ManualClock::new());
    let (fp, other) = ([1; 32], Owner::from_bytes([8; 16]));
    let r = StoredResponse { status: 200, headers: vec![], body: Bytes::new() };
    assert_eq!(now(s.begin(&key("a"), &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
    // An identical request with another owner token settles nothing of it.
    now(s.release(&key("a"), &other)).unwrap();
    now(s.abandon(&key("a"), &other)).unwrap();
    now(s.complete(&key("a"), &other, &r, 60 * S)).unwrap();
    assert_eq!(s.stats(), MemoryStats { pending: 1, records: 0, unknown: 0, scopes: 1 });
    assert_eq!(now(s.begin(&key("a"), &fp, &other, S, 60 * S)).unwrap(), Begin::InFlight);
    now(s.complete(&key("a"), &O, &r, 60 * S)).unwrap();
    assert_eq!(now(s.begin(&key("a"), &fp, &other, S, 60 * S)).unwrap(), Begin::Done(r));
}

fn scoped(scope: &str, k: &str) -> StoreKey {
    StoreKey { scope: scope.into(), key: k.into() }
}

#[test]
fn one_principal_cannot_fill_the_store_and_is_told_when_its_space_frees() {
    let clock = ManualClock::new();
    let s = MemoryStore::with_clock(8, clock.clone()).scope_share(0.5);
    let (fp, r) = ([1; 32], StoredResponse { status: 200, headers: vec![], body: Bytes::new() });
    for i in 0..4 {
        let k = scoped("a", &i.to_string());
        assert_eq!(now(s.begin(&k, &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
        now(s.complete(&k, &O, &r, 60 * S)).unwrap();
        clock.advance(S);
    }
    // "a" holds its half: refused, told when its oldest record expires (56 s from now).
    match now(s.begin(&scoped("a", "new"), &fp, &O, S, 60 * S)) {
        Err(StoreError::ScopeFull { frees_in }) => assert_eq!(frees_in, Some(56 * S)),
        other => panic!("{other:?}"),
    }
    // Its stored keys still replay, and another principal still gets new keys.
    assert_eq!(now(s.begin(&scoped("a", "0"), &fp, &O, S, 60 * S)).unwrap(), Begin::Done(r));
    assert_eq!(now(s.begin(&scoped("b", "x"), &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
    // Once a's oldest record expires, a has room again.
    clock.advance(56 * S);
    assert_eq!(now(s.begin(&scoped("a", "new"), &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
}

#[test]
fn outcome_unknown_records_are_bounded_per_principal_apart_from_finished_ones() {
    let clock = ManualClock::new();
    let s = MemoryStore::with_clock(8, clock.clone()).scope_share(0.5).scope_unknown(3);
    let (fp, r) = ([1; 32], StoredResponse { status: 200, headers: vec![], body: Bytes::new() });
    for i in 0..3 {
        let k = scoped("a", &i.to_string());
        assert_eq!(now(s.begin(&k, &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
        now(s.abandon(&k, &O)).unwrap();
    }
    // With room in the store, nobody is refused.
    assert_eq!(now(s.begin(&scoped("b", "0"), &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
    now(s.complete(&scoped("b", "0"), &O, &r, 60 * S)).unwrap();
    assert_eq!(s.stats(), MemoryStats { pending: 0, records: 4, unknown: 3, scopes: 2 });
    // In the reserve (4 of 8 free), "a" with 3 unknown outcomes is refused, though under its
    // share; "b" is not.
    match now(s.begin(&scoped("a", "next"), &fp, &O, S, 60 * S)) {
        Err(StoreError::ScopeFull { frees_in }) => assert_eq!(frees_in, Some(60 * S)),
        other => panic!("{other:?}"),
    }
    assert_eq!(now(s.begin(&scoped("b", "1"), &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
    // The unknown keys are never executed again while kept.
    assert_eq!(now(s.begin(&scoped("a", "0"), &fp, &O, S, 60 * S)).unwrap(), Begin::Unknown);
}

#[test]
fn a_full_store_says_when_its_oldest_record_expires_and_purges_oldest_first() {
    let clock = ManualClock::new();
    let s = MemoryStore::with_clock(3, clock.clone()).scope_share(1.0);
    let (fp, r) = ([1; 32], StoredResponse { status: 200, headers: vec![], body: Bytes::new() });
    for (i, ttl) in [(0, 30), (1, 10), (2, 20)] {
        let k = key(&i.to_string());
        assert_eq!(now(s.begin(&k, &fp, &O, S, ttl * S)).unwrap(), Begin::Execute);
        now(s.complete(&k, &O, &r, ttl * S)).unwrap();
    }
    match now(s.begin(&key("new"), &fp, &O, S, 60 * S)) {
        Err(StoreError::Full { frees_in }) => assert_eq!(frees_in, Some(10 * S)),
        other => panic!("{other:?}"),
    }
    clock.advance(10 * S);
    assert_eq!(now(s.begin(&key("new"), &fp, &O, S, 60 * S)).unwrap(), Begin::Execute);
    // The expired record was the one dropped: "1" is a new key again (and the store is full).
    assert!(matches!(now(s.begin(&key("1"), &fp, &O, S, 60 * S)), Err(StoreError::Full { .. })));
    assert_eq!(now(s.begin(&key("0"), &fp, &O, S, 60 * S)).unwrap(), Begin::Done(r));
    assert_eq!(s.stats(), MemoryStats { pending: 1, records: 2, unknown: 0, scopes: 1 });
}
