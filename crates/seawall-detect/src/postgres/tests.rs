use std::time::{Duration, SystemTime};

use proptest::prelude::*;

use super::*;

fn activity(groups: &[(u64, f64)]) -> Activity {
    Activity {
        at: SystemTime::UNIX_EPOCH,
        statements: groups
            .iter()
            .map(|&(n, age)| Statement {
                statement: "SELECT pg_sleep($1)".into(),
                running_copies: n,
                oldest_s: age,
                waiting_on_locks: 0,
            })
            .collect(),
    }
}

fn with_timeout(s: f64) -> PgOptions {
    PgOptions { caller_timeout: Some(Duration::from_secs_f64(s)), ..PgOptions::default() }
}

#[test]
fn many_copies_older_than_the_callers_timeout_are_work_for_callers_who_left() {
    let j = judge(&activity(&[(40, 3.2), (2, 0.1)]), &with_timeout(1.0));
    assert_eq!(j.as_str(), "callers_left");
    assert!(j.sentence().contains("40 copies"), "{}", j.sentence());
}

#[test]
fn copies_younger_than_the_timeout_or_too_few_are_quiet() {
    // Many, but every one younger than the callers' timeout: the callers still wait.
    assert_eq!(judge(&activity(&[(40, 0.8)]), &with_timeout(1.0)).as_str(), "quiet");
    // Old, but fewer than min_copies: one slow report query is not a storm.
    assert_eq!(judge(&activity(&[(3, 30.0)]), &with_timeout(1.0)).as_str(), "quiet");
    assert_eq!(judge(&activity(&[]), &with_timeout(1.0)), PgJudgement::Quiet { largest: 0 });
}

#[test]
fn without_a_caller_timeout_it_says_old_queue_not_callers_left() {
    let opts = PgOptions::default();
    assert_eq!(judge(&activity(&[(40, 12.0)]), &opts).as_str(), "old_queue");
    assert_eq!(judge(&activity(&[(40, 3.0)]), &opts).as_str(), "quiet");
}

#[test]
fn a_hidden_statement_says_which_grant_is_missing() {
    let mut a = activity(&[(40, 5.0)]);
    a.statements[0].statement = HIDDEN_STATEMENT.into();
    assert!(judge(&a, &with_timeout(1.0)).sentence().contains("pg_read_all_stats"));
}

proptest! {
    /// A row's raw values, whatever PostgreSQL (or something speaking its protocol) sends, give
    /// a group with counts ≥ 0, an age that is finite and ≥ 0, at most 120 characters and no
    /// control character.
    #[test]
    fn rows_are_clamped(
        text in proptest::option::of(".{0,400}"),
        n in proptest::option::of(any::<i64>()),
        age in proptest::option::of(any::<f64>()),
        locks in proptest::option::of(any::<i64>()),
    ) {
        let s = Statement::from_row(text.as_deref(), n, age, locks);
        prop_assert!(s.oldest_s.is_finite() && s.oldest_s >= 0.0);
        prop_assert!(s.statement.chars().count() <= STATEMENT_CHARS);
        prop_assert!(!s.statement.chars().any(char::is_control));
        prop_assert!(s.waiting_on_locks <= s.running_copies);
        let opts = with_timeout(1.0);
        let _ = judge(&Activity { at: SystemTime::UNIX_EPOCH, statements: vec![s] }, &opts).sentence();
    }
}
