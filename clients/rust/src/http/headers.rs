//! The README's client contract, as pure functions of a decision: the
//! `RateLimit-Policy`, `RateLimit` and `Retry-After` fields
//! (draft-ietf-httpapi-ratelimit-headers-11) and the `quota-exceeded`
//! problem body.

use crate::policy::ceil_millis;
use crate::reply::{AllDecision, Decision};
use crate::Quota;
use std::time::Duration;

/// What the headers say about one limit: its name and its rate.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Named {
    /// The limit's name (a header token).
    pub name: String,
    /// Its rate.
    pub quota: Quota,
}

impl Named {
    /// The limit `name` of rate `quota`.
    pub fn new(name: impl Into<String>, quota: Quota) -> Named {
        Named {
            name: name.into(),
            quota,
        }
    }
}

/// Whether `name` is a token of HTTP structured fields' keys as the
/// draft's header fields carry a limit's name in a quoted string: visible
/// ASCII letters, digits and `!#$%&'*+-.^_`|~`, at least one (no quote or
/// backslash to escape, in the headers or the JSON body).
pub(crate) fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A duration as whole seconds, rounded up: a client that waits that long
/// is never early.
pub fn ceil_seconds(d: Duration) -> u64 {
    ceil_millis(d).div_ceil(1000)
}

/// On a denial with a known wait: the limit that decides it (the one with
/// the longest wait) and that wait, never shorter than any denying
/// limit's own.
pub fn deciding(decision: &AllDecision) -> Option<(usize, Duration)> {
    let wait = decision.retry_after.filter(|_| !decision.allowed)?;
    let (i, longest) = decision
        .limits
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.allowed)
        .max_by_key(|(_, d)| d.retry_after)?;
    Some((i, wait.max(longest.retry_after.unwrap_or_default())))
}

/// A limit's `RateLimit` item: `r` what is left, `t` the seconds in which
/// no more than `r` may be used (the wait when nothing is left; otherwise
/// until the limit is full again), at most the window `w`.
fn item(limit: &Named, d: &Decision) -> String {
    let until = match d.retry_after {
        Some(wait) if d.remaining == 0 && !wait.is_zero() => wait,
        _ => d.reset_after,
    };
    let t = ceil_seconds(until).min(limit.quota.w);
    format!("\"{}\";r={};t={t}", limit.name, d.remaining)
}

/// The response header fields for a decision, lower-case names, limits in
/// the order of `limits` (the decision's order).
///
/// `RateLimit-Policy` lists every limit, the same on every response. On a
/// denial `RateLimit` names only the deciding limit, its `t` equal to
/// `Retry-After`: the draft says `Retry-After` should not point before the
/// end of any reported window, and the other limits' windows may end later
/// than the wait.
pub fn header_fields(decision: &AllDecision, limits: &[Named]) -> Vec<(&'static str, String)> {
    let policy = limits
        .iter()
        .map(|l| format!("\"{}\";q={};w={}", l.name, l.quota.q, l.quota.w))
        .collect::<Vec<_>>()
        .join(", ");
    let mut fields = vec![("ratelimit-policy", policy)];
    match deciding(decision) {
        Some((i, wait)) => {
            let wait = ceil_seconds(wait);
            let remaining = decision.limits.get(i).map_or(0, |d| d.remaining);
            let name = limits.get(i).map_or("", |l| l.name.as_str());
            fields.push(("ratelimit", format!("\"{name}\";r={remaining};t={wait}")));
            fields.push(("retry-after", wait.to_string()));
        }
        None => {
            let current = limits
                .iter()
                .zip(&decision.limits)
                .map(|(l, d)| item(l, d))
                .collect::<Vec<_>>()
                .join(", ");
            fields.push(("ratelimit", current));
        }
    }
    fields
}

/// The older `X-RateLimit-*` fields (tower_governor's, GitHub's), for
/// clients that read them: `x-ratelimit-limit` (the quota),
/// `x-ratelimit-remaining` and `x-ratelimit-reset` (seconds until the
/// limit is full again, or on a denial the wait) of the deciding limit on a
/// denial (with `x-ratelimit-after`, the wait), otherwise of the limit
/// with the least left.
pub fn legacy_fields(decision: &AllDecision, limits: &[Named]) -> Vec<(&'static str, String)> {
    let pair = |i: usize| Some((limits.get(i)?, decision.limits.get(i)?));
    if let Some((i, wait)) = deciding(decision) {
        let wait = ceil_seconds(wait).to_string();
        let Some((limit, d)) = pair(i) else {
            return vec![("x-ratelimit-after", wait)];
        };
        return vec![
            ("x-ratelimit-limit", limit.quota.q.to_string()),
            ("x-ratelimit-remaining", d.remaining.to_string()),
            ("x-ratelimit-reset", wait.clone()),
            ("x-ratelimit-after", wait),
        ];
    }
    let least = (0..limits.len().min(decision.limits.len()))
        .min_by_key(|&i| decision.limits[i].remaining)
        .and_then(pair);
    let Some((limit, d)) = least else {
        return Vec::new();
    };
    let reset = ceil_seconds(d.reset_after).min(limit.quota.w);
    vec![
        ("x-ratelimit-limit", limit.quota.q.to_string()),
        ("x-ratelimit-remaining", d.remaining.to_string()),
        ("x-ratelimit-reset", reset.to_string()),
    ]
}

/// The `application/problem+json` body of a 429, naming the limits that
/// denied.
pub fn problem(decision: &AllDecision, limits: &[Named]) -> String {
    let violated = limits
        .iter()
        .zip(&decision.limits)
        .filter(|(_, d)| !d.allowed)
        .map(|(l, _)| format!("\"{}\"", l.name))
        .collect::<Vec<_>>()
        .join(",");
    problem_naming(&violated)
}

/// The problem body naming `violated` (quoted names, comma-separated).
pub(crate) fn problem_naming(violated: &str) -> String {
    format!(
        "{{\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\",\
         \"title\":\"Request cannot be satisfied as assigned quota has been exceeded\",\
         \"violated-policies\":[{violated}]}}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn denied(retry_ms: u64) -> Decision {
        Decision {
            allowed: false,
            limit: 10,
            remaining: 0,
            retry_after: Some(Duration::from_millis(retry_ms)),
            reset_after: Duration::from_secs(90),
            granted: None,
            lease: None,
        }
    }

    fn named() -> Vec<Named> {
        [("per-key", 3, 30), ("global", 5, 60)]
            .map(|(name, q, w)| Named {
                name: name.into(),
                quota: Quota { q, w },
            })
            .to_vec()
    }

    #[test]
    fn the_longest_wait_decides_not_the_first_denial() {
        for (waits, name) in [([2_000, 9_500], "global"), ([9_500, 2_000], "per-key")] {
            let decision = AllDecision {
                allowed: false,
                blocked_by: Some(0),
                retry_after: Some(Duration::from_millis(9_500)),
                limits: waits.iter().map(|&w| denied(w)).collect(),
            };
            let fields: HashMap<_, _> = header_fields(&decision, &named()).into_iter().collect();
            assert_eq!(fields["retry-after"], "10");
            assert_eq!(fields["ratelimit"], format!("\"{name}\";r=0;t=10"));
        }
        // Retry-After is never shorter than a denying limit's own wait.
        let decision = AllDecision {
            allowed: false,
            blocked_by: Some(0),
            retry_after: Some(Duration::from_millis(1_000)),
            limits: vec![denied(3_001), denied(500)],
        };
        let fields: HashMap<_, _> = header_fields(&decision, &named()).into_iter().collect();
        assert_eq!(fields["retry-after"], "4");
        assert!(problem(&decision, &named()).contains("[\"per-key\",\"global\"]"));
    }

    #[test]
    fn seconds_round_up() {
        let s = |ms| ceil_seconds(Duration::from_millis(ms));
        assert_eq!([s(0), s(1), s(1000), s(1001)], [0, 1, 1, 2]);
        assert_eq!(ceil_seconds(Duration::from_nanos(1)), 1);
    }
}
