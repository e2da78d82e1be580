//! The verdict in words: the sentence a report's column opens with, the cell of a table, the
//! legend under it. Every tool prints these and nothing else for a verdict.

use super::{Judgement, MIN_REQUESTS_BEFORE, MOST, NotJudged, SUSTAIN_S, TOLERANCE, Verdict};
use crate::numbers::{number, pct, secs};

/// Whether a verdict is good news, bad news, or neither (not judged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Tone {
    /// Recovered.
    Good,
    /// Healed late, degraded, stays down.
    Bad,
    /// Not judged.
    Neutral,
}

/// A number and its unit kept on one line: "0 %" must not break into "0" and "%".
fn nb(s: String) -> String {
    s.replace(' ', "\u{a0}")
}

/// The verdict in one plain sentence, given the run's goodput before and after the fault.
pub fn sentence(v: Verdict, goodput_before: f64, goodput_after: f64) -> String {
    let (before, after) = (nb(pct(goodput_before)), nb(pct(goodput_after)));
    match v {
        Verdict::Recovered { recovery_s } if recovery_s < 0.05 => {
            "recovered as soon as the fault ended".into()
        }
        Verdict::Recovered { recovery_s } => {
            format!("recovered {} after the fault", nb(secs(recovery_s)))
        }
        Verdict::HealedLate { .. } => {
            format!("healed only after losing most requests — goodput {after} after the fault")
        }
        Verdict::Degraded => {
            format!("did not fully recover — goodput {after} after the fault, {before} before")
        }
        Verdict::StaysDown => format!("stays down — goodput {after} after the fault"),
        Verdict::NotJudged { because } => format!("not judged: {}", reason(because)),
    }
}

/// Why a run was not judged, in words.
pub fn reason(because: NotJudged) -> String {
    match because {
        NotJudged::NoFault => "no fault was injected, so there is nothing to recover from".into(),
        NotJudged::TooLittleTraffic { requests_before } => format!(
            "{} edge requests before the fault; {MIN_REQUESTS_BEFORE:.0} are needed for a level \
             to return to",
            number(requests_before, 0)
        ),
        NotJudged::UnhealthyBefore { level } if level <= 0.0 => {
            "the stack never served — goodput 0 % before the fault, so there is no level to \
             return to"
                .replace(" %", "\u{a0}%")
        }
        NotJudged::UnhealthyBefore { level } => format!(
            "goodput was only {} in the median second before the fault — it had fallen over \
             already, so there is no healthy level to return to",
            nb(pct(level))
        ),
        NotJudged::EndedTooSoon { after_fault_s } => format!(
            "the run ends {} after the fault; {} are needed to see a sustained return",
            nb(secs(after_fault_s)),
            nb(secs(SUSTAIN_S))
        ),
    }
}

/// The verdict's cell in a table's "recovered" column: `yes, 1.0 s`, `no`, `no (late)`,
/// `partly`, `not judged`.
pub fn cell(v: Verdict) -> String {
    match v {
        Verdict::Recovered { recovery_s } => format!("yes, {}", secs(recovery_s)),
        Verdict::HealedLate { .. } => "no (late)".into(),
        Verdict::Degraded => "partly".into(),
        Verdict::StaysDown => "no".into(),
        Verdict::NotJudged { .. } => "not judged".into(),
    }
}

/// Good news, bad news, or neither.
pub fn tone(v: Verdict) -> Tone {
    match v {
        Verdict::Recovered { .. } => Tone::Good,
        Verdict::NotJudged { .. } => Tone::Neutral,
        _ => Tone::Bad,
    }
}

/// What the "recovered" cells mean, for under a table (lines within 100 columns).
pub fn legend() -> String {
    let (tol, most, w) = (pct(TOLERANCE), pct(MOST), secs(SUSTAIN_S));
    format!(
        "recovered: goodput back to ≥ {tol} of its pre-fault level with no relapse of {w} or more \
         after it\n  (shorter dips are noise) · yes, N s: N s after the fault ended · no (late): \
         back, after losing\n  most requests · partly: back to ≥ {most} of the level, not for \
         good · no: below {most}\n"
    )
}

impl Judgement {
    /// [`sentence`] for this judgement.
    pub fn sentence(&self) -> String {
        sentence(self.verdict, self.goodput_before, self.goodput_after)
    }
}
