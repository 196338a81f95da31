//! Replies as types, read from RESP2 arrays and RESP3 maps alike.

use crate::Error;
use redis::Value;
use std::time::Duration;

/// A lease of a concurrency limit: 44 hex digits, as `RL.ACQUIRE` hands it
/// out and `RL.RELEASE` / `RL.RENEW` take it back.
///
/// ```
/// use redis_ratelimit_client::LeaseId;
/// // A lease kept elsewhere (a job's record), to release later.
/// let lease = LeaseId::new("06455a2f5e300000000000000100000064d9");
/// assert_eq!(lease.as_str().len(), 36);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct LeaseId(pub String);

impl LeaseId {
    /// The lease `id`, as the server handed it out.
    pub fn new(id: impl Into<String>) -> LeaseId {
        LeaseId(id.into())
    }

    /// The lease's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for LeaseId {
    fn from(id: String) -> LeaseId {
        LeaseId(id)
    }
}

/// One limit's decision: the five fields of every decision command, plus
/// `granted` after `PARTIAL` and `lease` after `RL.ACQUIRE` (or a
/// `CONCURRENCY` limit in `RL.ALL`).
///
/// Read from the store's replies; built by hand (to test code that reads
/// them) with [`Decision::admitted`] or [`Decision::denied`]:
///
/// ```
/// use redis_ratelimit_client::Decision;
/// use std::time::Duration;
/// let denied = Decision::denied(10, Some(Duration::from_millis(600)))
///     .with_reset_after(Duration::from_secs(12));
/// assert!(!denied.allowed && !denied.never());
/// assert_eq!(denied.remaining, 0);
/// let admitted = Decision::admitted(10, 9).with_reset_after(Duration::from_millis(1200));
/// assert!(admitted.allowed);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decision {
    /// Whether the request was admitted (charged).
    pub allowed: bool,
    /// The most admitted at once (burst, capacity, window limit).
    pub limit: u64,
    /// Requests of cost 1 that would be admitted right now, after this one.
    pub remaining: u64,
    /// Denied: the wait until this same request would be admitted; `None`
    /// when allowed, or when it never can be (see [`Decision::never`]).
    pub retry_after: Option<Duration>,
    /// Until the key is back to its full, untouched state (its TTL).
    pub reset_after: Duration,
    /// `PARTIAL`: the units charged (0 when denied).
    pub granted: Option<u64>,
    /// `RL.ACQUIRE`: the lease, when one was taken.
    pub lease: Option<LeaseId>,
}

impl Decision {
    /// An admission by a limit of `limit`, with `remaining` left (no wait,
    /// a `reset_after` of zero until [`Decision::with_reset_after`]).
    pub fn admitted(limit: u64, remaining: u64) -> Decision {
        Decision {
            allowed: true,
            limit,
            remaining,
            retry_after: None,
            reset_after: Duration::ZERO,
            granted: None,
            lease: None,
        }
    }

    /// A denial by a limit of `limit` with nothing left, admissible after
    /// `retry_after` (`None`: never).
    pub fn denied(limit: u64, retry_after: Option<Duration>) -> Decision {
        Decision {
            allowed: false,
            remaining: 0,
            retry_after,
            ..Decision::admitted(limit, 0)
        }
    }

    /// The same decision with `remaining` left.
    pub fn with_remaining(mut self, remaining: u64) -> Decision {
        self.remaining = remaining;
        self
    }

    /// The same decision with this `reset_after`.
    pub fn with_reset_after(mut self, reset_after: Duration) -> Decision {
        self.reset_after = reset_after;
        self
    }

    /// The same decision with `granted` units (a `PARTIAL` charge's).
    pub fn with_granted(mut self, granted: u64) -> Decision {
        self.granted = Some(granted);
        self
    }

    /// The same decision with a lease.
    pub fn with_lease(mut self, lease: LeaseId) -> Decision {
        self.lease = Some(lease);
        self
    }

    /// Denied for good: the cost is above what the limit can ever admit.
    pub fn never(&self) -> bool {
        !self.allowed && self.retry_after.is_none()
    }
}

/// A reservation's reply (`RESERVE max_delay`): the decision, and when an
/// admitted one starts.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reservation {
    /// The decision: admitted (charged now), or denied as without
    /// `RESERVE` (nothing charged).
    pub decision: Decision,
    /// Admitted: the delay after which its admission starts (zero: at
    /// once; rounded up to the millisecond, never early). `None` when
    /// denied.
    pub delay: Option<Duration>,
}

impl Reservation {
    /// Reads `[allowed, limit, remaining, retry_after_ms, reset_after_ms,
    /// delay_ms]` or the RESP3 map with `delay_ms`.
    pub fn from_value(v: &Value) -> Result<Reservation, Error> {
        let (decision, delay) = match v {
            Value::Array(items) if items.len() == 6 => (
                Decision::from_value(&Value::Array(items[..5].to_vec()))?,
                &items[5],
            ),
            Value::Map(map) => (Decision::from_value(v)?, required(map, "delay_ms")?),
            other => return Err(shape("a reservation", other)),
        };
        Ok(Reservation {
            decision,
            delay: wait_ms(delay)?,
        })
    }
}

/// `RL.ALL`'s decision over several limits (the tower layer puts it in
/// each served request's extensions).
///
/// ```
/// use redis_ratelimit_client::{AllDecision, Decision};
/// use std::time::Duration;
/// let s = Duration::from_secs;
/// let d = AllDecision::new(vec![
///     Decision::admitted(10, 3),
///     Decision::denied(100, Some(s(2))),
///     Decision::denied(5, Some(s(7))),
/// ]);
/// assert!(!d.allowed);
/// assert_eq!((d.blocked_by, d.retry_after), (Some(2), Some(s(7))));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AllDecision {
    /// Whether every limit admitted the request (and each was charged).
    pub allowed: bool,
    /// The 0-based limit that decides a denial: the first that can never
    /// admit, else the one with the longest wait.
    pub blocked_by: Option<usize>,
    /// The wait until every limit would admit; `None` when allowed or never.
    pub retry_after: Option<Duration>,
    /// Each limit's own decision, in key order (on a denial, its dry run).
    pub limits: Vec<Decision>,
}

/// `CL.THROTTLE`'s reply, in redis-cell's whole seconds.
///
/// ```
/// use redis_ratelimit_client::ThrottleDecision;
/// use std::time::Duration;
/// let d = ThrottleDecision::admitted(16, 15, Duration::from_secs(2));
/// assert!(!d.limited && d.retry_after.is_none());
/// let d = ThrottleDecision::limited(16, Duration::from_secs(2), Duration::from_secs(60));
/// assert_eq!(d.remaining, 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThrottleDecision {
    /// Whether the request was refused.
    pub limited: bool,
    /// `max_burst + 1`.
    pub limit: u64,
    /// What is left after this request.
    pub remaining: u64,
    /// `None` when allowed.
    pub retry_after: Option<Duration>,
    /// Until the key is full again.
    pub reset_after: Duration,
}

fn shape(what: &str, v: &Value) -> Error {
    Error::Reply(format!("expected {what}, got {v:?}"))
}

fn int(v: &Value) -> Result<i64, Error> {
    match v {
        Value::Int(n) => Ok(*n),
        other => Err(shape("an integer", other)),
    }
}

fn count(v: &Value) -> Result<u64, Error> {
    u64::try_from(int(v)?).map_err(|_| shape("a count", v))
}

fn flag(v: &Value) -> Result<bool, Error> {
    match v {
        Value::Boolean(b) => Ok(*b),
        Value::Int(0) => Ok(false),
        Value::Int(1) => Ok(true),
        other => Err(shape("0, 1 or a boolean", other)),
    }
}

/// Milliseconds, `-1` for none.
fn wait_ms(v: &Value) -> Result<Option<Duration>, Error> {
    let ms = int(v)?;
    Ok(u64::try_from(ms).ok().map(Duration::from_millis))
}

fn millis(v: &Value) -> Result<Duration, Error> {
    Ok(Duration::from_millis(count(v)?))
}

fn lease(v: &Value) -> Result<Option<LeaseId>, Error> {
    match v {
        Value::Nil => Ok(None),
        Value::BulkString(b) => String::from_utf8(b.clone())
            .map(|s| Some(LeaseId(s)))
            .map_err(|_| shape("a lease", v)),
        Value::SimpleString(s) => Ok(Some(LeaseId(s.clone()))),
        other => Err(shape("a lease or nil", other)),
    }
}

/// A RESP3 map's value for `name`.
fn field<'a>(map: &'a [(Value, Value)], name: &str) -> Option<&'a Value> {
    map.iter().find_map(|(k, v)| {
        let matches = match k {
            Value::BulkString(b) => b == name.as_bytes(),
            Value::SimpleString(s) => s == name,
            _ => false,
        };
        matches.then_some(v)
    })
}

fn required<'a>(map: &'a [(Value, Value)], name: &str) -> Result<&'a Value, Error> {
    field(map, name).ok_or_else(|| Error::Reply(format!("no '{name}' in {map:?}")))
}

impl Decision {
    /// Reads a decision: `[allowed, limit, remaining, retry_after_ms,
    /// reset_after_ms, (granted), (lease)]` or the RESP3 map of those names.
    pub fn from_value(v: &Value) -> Result<Decision, Error> {
        match v {
            Value::Array(items) if items.len() >= 5 => {
                let mut d = Decision {
                    allowed: flag(&items[0])?,
                    limit: count(&items[1])?,
                    remaining: count(&items[2])?,
                    retry_after: wait_ms(&items[3])?,
                    reset_after: millis(&items[4])?,
                    granted: None,
                    lease: None,
                };
                // The optional fields differ in type: `granted` is an
                // integer, a lease a string or nil.
                for extra in &items[5..] {
                    match extra {
                        Value::Int(_) => d.granted = Some(count(extra)?),
                        other => d.lease = lease(other)?,
                    }
                }
                Ok(d)
            }
            Value::Map(map) => Ok(Decision {
                allowed: flag(required(map, "allowed")?)?,
                limit: count(required(map, "limit")?)?,
                remaining: count(required(map, "remaining")?)?,
                retry_after: wait_ms(required(map, "retry_after_ms")?)?,
                reset_after: millis(required(map, "reset_after_ms")?)?,
                granted: field(map, "granted").map(count).transpose()?,
                lease: field(map, "lease").map(lease).transpose()?.flatten(),
            }),
            other => Err(shape("a decision", other)),
        }
    }
}

impl AllDecision {
    /// The decision over `limits` as `RL.ALL` makes it: allowed when each
    /// limit is; else blocked by the first limit that can never admit, or
    /// the one with the longest wait, and `retry_after` that wait.
    pub fn new(limits: Vec<Decision>) -> AllDecision {
        let denied = || limits.iter().enumerate().filter(|(_, d)| !d.allowed);
        let blocked_by = denied()
            .find(|(_, d)| d.never())
            .or_else(|| denied().max_by_key(|(i, d)| (d.retry_after, std::cmp::Reverse(*i))))
            .map(|(i, _)| i);
        let retry_after = match blocked_by {
            Some(i) => limits[i].retry_after,
            None => None,
        };
        AllDecision {
            allowed: blocked_by.is_none(),
            blocked_by,
            retry_after,
            limits,
        }
    }

    /// Reads `[allowed, blocked_by, retry_after_ms, reply_1, ...]` or the
    /// RESP3 map with `allowed`, `blocked_by`, `retry_after_ms`, `limits`.
    pub fn from_value(v: &Value) -> Result<AllDecision, Error> {
        let (allowed, blocked_by, retry, limits) = match v {
            Value::Array(items) if items.len() >= 3 => {
                (&items[0], &items[1], &items[2], &items[3..])
            }
            Value::Map(map) => {
                let limits = match required(map, "limits")? {
                    Value::Array(l) => l.as_slice(),
                    other => return Err(shape("an array of limits", other)),
                };
                (
                    required(map, "allowed")?,
                    required(map, "blocked_by")?,
                    required(map, "retry_after_ms")?,
                    limits,
                )
            }
            other => return Err(shape("an RL.ALL reply", other)),
        };
        Ok(AllDecision {
            allowed: flag(allowed)?,
            blocked_by: usize::try_from(int(blocked_by)?).ok(),
            retry_after: wait_ms(retry)?,
            limits: limits
                .iter()
                .map(Decision::from_value)
                .collect::<Result<_, _>>()?,
        })
    }
}

impl ThrottleDecision {
    /// An admission by a limit of `limit` (`max_burst + 1`), `remaining`
    /// left, full again after `reset_after`.
    pub fn admitted(limit: u64, remaining: u64, reset_after: Duration) -> ThrottleDecision {
        ThrottleDecision {
            limited: false,
            limit,
            remaining,
            retry_after: None,
            reset_after,
        }
    }

    /// A refusal by a limit of `limit`, with nothing left: admissible
    /// after `retry_after`, full again after `reset_after`.
    pub fn limited(limit: u64, retry_after: Duration, reset_after: Duration) -> ThrottleDecision {
        ThrottleDecision {
            limited: true,
            limit,
            remaining: 0,
            retry_after: Some(retry_after),
            reset_after,
        }
    }

    /// Reads `[limited, limit, remaining, retry_after_s, reset_after_s]`.
    pub fn from_value(v: &Value) -> Result<ThrottleDecision, Error> {
        let Value::Array(items) = v else {
            return Err(shape("a CL.THROTTLE reply", v));
        };
        let [limited, limit, remaining, retry, reset] = items.as_slice() else {
            return Err(shape("five fields", v));
        };
        Ok(ThrottleDecision {
            limited: flag(limited)?,
            limit: count(limit)?,
            remaining: count(remaining)?,
            retry_after: u64::try_from(int(retry)?).ok().map(Duration::from_secs),
            reset_after: Duration::from_secs(count(reset)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn resp2_and_resp3_read_the_same() {
        let resp2 = Value::Array(vec![
            Value::Int(0),
            Value::Int(10),
            Value::Int(0),
            Value::Int(600),
            Value::Int(12000),
            Value::Int(0),
        ]);
        let resp3 = Value::Map(vec![
            (bulk("allowed"), Value::Boolean(false)),
            (bulk("limit"), Value::Int(10)),
            (bulk("remaining"), Value::Int(0)),
            (bulk("retry_after_ms"), Value::Int(600)),
            (bulk("reset_after_ms"), Value::Int(12000)),
            (bulk("granted"), Value::Int(0)),
        ]);
        let expected = Decision {
            allowed: false,
            limit: 10,
            remaining: 0,
            retry_after: Some(Duration::from_millis(600)),
            reset_after: Duration::from_secs(12),
            granted: Some(0),
            lease: None,
        };
        assert_eq!(Decision::from_value(&resp2).unwrap(), expected);
        assert_eq!(Decision::from_value(&resp3).unwrap(), expected);
    }

    #[test]
    fn a_lease_is_the_string_after_the_five_fields() {
        let v = Value::Array(vec![
            Value::Int(1),
            Value::Int(1),
            Value::Int(0),
            Value::Int(-1),
            Value::Int(30000),
            bulk("06455a2f5e300000000000000100000064d9"),
        ]);
        let d = Decision::from_value(&v).unwrap();
        assert_eq!(d.retry_after, None);
        assert!(!d.never());
        assert_eq!(
            d.lease,
            Some(LeaseId("06455a2f5e300000000000000100000064d9".into()))
        );
    }

    #[test]
    fn wrong_shapes_are_reply_errors() {
        for v in [
            Value::Nil,
            Value::Array(vec![Value::Int(1)]),
            Value::Array(vec![Value::Int(2); 5]),
            Value::Array(vec![
                Value::Int(1),
                Value::Int(-5),
                Value::Int(0),
                Value::Int(-1),
                Value::Int(0),
            ]),
            Value::Map(vec![(bulk("allowed"), Value::Boolean(true))]),
        ] {
            assert!(
                matches!(Decision::from_value(&v), Err(Error::Reply(_))),
                "{v:?}"
            );
        }
    }
}
