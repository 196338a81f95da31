//! Every command of the module as a value: built with typed arguments,
//! turned into a `redis::Cmd`, its reply read into a type. Send one with
//! [`crate::Client::send`] (async) or [`Command::query`] (blocking).

use crate::landing::{taken, Undo};
use crate::policy::{duration_arg, Concurrency, Policy};
use crate::reply::{AllDecision, Decision, LeaseId, Reservation, ThrottleDecision};
use crate::Error;
use redis::Value;
use std::time::Duration;

/// A command of the module and the type of its reply.
pub trait Command {
    /// The reply's type.
    type Output;

    /// The command as the redis crate sends it.
    fn to_cmd(&self) -> redis::Cmd;

    /// Reads the reply.
    fn parse(reply: &Value) -> Result<Self::Output, Error>;

    /// How long the server may hold the reply back (`WAIT`): a client's
    /// timeout is added to it.
    fn waits(&self) -> Duration {
        Duration::ZERO
    }

    /// What gives back what the command took when its caller stopped
    /// waiting before the answer: a charge is refunded, a lease released,
    /// a `CL.THROTTLE` quantity given back (a negative quantity). `None`
    /// (the default, and `RL.SKETCH`'s): nothing to give back.
    ///
    /// A [`crate::Client`] call whose caller stops waiting (the future
    /// dropped, or [`Error::Timeout`]) may or may not have reached the
    /// server, so it is finished in the background on the current tokio
    /// runtime (for up to [`crate::ORPHAN_WAIT`] beyond its `WAIT`), and
    /// this undo is sent if its answer says something was taken. A refund
    /// or release cut short still reaches the server.
    fn undo(&self) -> Option<Undo> {
        None
    }

    /// Sends the command on a blocking connection.
    fn query(&self, conn: &mut dyn redis::ConnectionLike) -> Result<Self::Output, Error> {
        let start = std::time::Instant::now();
        let reply: Value = self
            .to_cmd()
            .query(conn)
            .map_err(|e| Error::from(e).with_deadline(start.elapsed()))?;
        Self::parse(&reply)
    }
}

/// What a decision charges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Charge {
    /// `COST n` (1 by default): all or nothing.
    Cost(u64),
    /// `COST n FORCE`: charged even when it does not fit, as a debt.
    Force(u64),
    /// `COST n PARTIAL`: the most that fits, up to `n` ([`Decision::granted`]).
    Partial(u64),
    /// `REFUND n`: `n` units given back.
    Refund(u64),
}

impl Charge {
    fn append(self, cmd: &mut redis::Cmd) {
        match self {
            Charge::Cost(1) => {}
            Charge::Cost(n) => {
                cmd.arg("COST").arg(n);
            }
            Charge::Force(n) => {
                cmd.arg("COST").arg(n).arg("FORCE");
            }
            Charge::Partial(n) => {
                cmd.arg("COST").arg(n).arg("PARTIAL");
            }
            Charge::Refund(n) => {
                cmd.arg("REFUND").arg(n);
            }
        }
    }
}

/// The options every decision command shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Options {
    charge: Charge,
    dryrun: bool,
    wait: Option<Duration>,
    jitter: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            charge: Charge::Cost(1),
            dryrun: false,
            wait: None,
            jitter: false,
        }
    }
}

impl Options {
    fn append(&self, cmd: &mut redis::Cmd) {
        self.charge.append(cmd);
        if self.dryrun {
            cmd.arg("DRYRUN");
        }
        if let Some(wait) = self.wait {
            cmd.arg("WAIT").arg(duration_arg(wait));
        }
        if self.jitter {
            cmd.arg("JITTER");
        }
    }
}

/// The option setters shared by [`Decide`] and [`All`].
macro_rules! option_setters {
    () => {
        /// `COST n`: what the request takes (default 1).
        pub fn cost(mut self, n: u64) -> Self {
            self.options.charge = Charge::Cost(n);
            self
        }

        /// Any kind of [`Charge`].
        pub fn charge(mut self, charge: Charge) -> Self {
            self.options.charge = charge;
            self
        }

        /// `DRYRUN`: the decision, changing nothing.
        pub fn dryrun(mut self) -> Self {
            self.options.dryrun = true;
            self
        }

        /// `WAIT timeout`: queue on the server for up to `timeout` instead
        /// of being denied.
        pub fn wait(mut self, timeout: Duration) -> Self {
            self.options.wait = Some(timeout);
            self
        }

        /// `JITTER`: a denial's `retry_after` is spread over the time the
        /// key needs to admit the clients it denied recently, never earlier
        /// than the true wait.
        pub fn jitter(mut self) -> Self {
            self.options.jitter = true;
            self
        }
    };
}

/// One limit decided on its own key: `RL.GCRA`, `RL.BUCKET`, `RL.SLIDING`,
/// `RL.FIXED`, or `RL.ACQUIRE` for a [`Concurrency`] policy.
///
/// ```no_run
/// # use redis_ratelimit_client::{Decide, Gcra};
/// # use std::time::Duration;
/// let call = Decide::new("rl:user:42", Gcra::new(10, Duration::from_secs(1)).burst(20)).cost(3);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decide {
    /// The key the limit is kept at.
    pub key: String,
    /// The limit.
    pub policy: Policy,
    options: Options,
}

impl Decide {
    /// The decision of `policy` on `key` (a cost of 1 until told otherwise).
    pub fn new(key: impl Into<String>, policy: impl Into<Policy>) -> Decide {
        Decide {
            key: key.into(),
            policy: policy.into(),
            options: Options::default(),
        }
    }

    option_setters!();
}

impl Command for Decide {
    type Output = Decision;

    fn to_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd(self.policy.command_name());
        cmd.arg(&self.key);
        self.policy.append_words(&mut cmd, false);
        self.options.append(&mut cmd);
        cmd
    }

    fn parse(reply: &Value) -> Result<Decision, Error> {
        Decision::from_value(reply)
    }

    fn waits(&self) -> Duration {
        self.options.wait.unwrap_or_default()
    }

    fn undo(&self) -> Option<Undo> {
        if self.options.dryrun {
            return None;
        }
        Undo::decide(self, self.options.charge)
    }
}

impl Decide {
    /// What the decision charges.
    pub(crate) fn charge_of(&self) -> Charge {
        self.options.charge
    }
}

impl Decide {
    /// `RESERVE max_delay`: admitted now if the request would be admitted
    /// within `max_delay`, its admission starting after the delay the
    /// reply says ([`Reservation::delay`]); sleep that long, then go. On
    /// GCRA and BUCKET limits (the server refuses the others by name).
    pub fn reserve(self, max_delay: Duration) -> Reserve {
        Reserve {
            call: self,
            max_delay,
        }
    }
}

/// A [`Decide`] with `RESERVE max_delay` ([`Decide::reserve`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reserve {
    /// The decision asked.
    pub call: Decide,
    /// The longest delay accepted.
    pub max_delay: Duration,
}

impl Command for Reserve {
    type Output = Reservation;

    fn to_cmd(&self) -> redis::Cmd {
        let mut cmd = self.call.to_cmd();
        cmd.arg("RESERVE").arg(duration_arg(self.max_delay));
        cmd
    }

    fn parse(reply: &Value) -> Result<Reservation, Error> {
        Reservation::from_value(reply)
    }

    fn undo(&self) -> Option<Undo> {
        if self.call.options.dryrun {
            return None;
        }
        Undo::reservation(&self.call, self.call.options.charge)
    }
}

/// `RL.ACQUIRE key limit ttl`: a [`Decide`] on a [`Concurrency`] policy.
pub fn acquire(key: impl Into<String>, limit: u64, ttl: Duration) -> Decide {
    Decide::new(key, Concurrency::new(limit, ttl))
}

/// Several limits, one all-or-nothing decision (`RL.ALL`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct All {
    limits: Vec<(String, Policy)>,
    options: Options,
    /// `COSTS` or `REFUND COSTS`, one per key, instead of the charge's one.
    costs: Option<Vec<u64>>,
}

impl All {
    /// No limit yet: add them with [`All::limit`].
    pub fn new() -> All {
        All::default()
    }

    /// Adds a limit on `key`; keys must differ.
    pub fn limit(mut self, key: impl Into<String>, policy: impl Into<Policy>) -> All {
        self.limits.push((key.into(), policy.into()));
        self
    }

    /// `COSTS c1 .. cN`: each key its own cost (or, after
    /// `.charge(Charge::Refund(_))`, `REFUND COSTS`: its own refund).
    pub fn costs(mut self, costs: impl IntoIterator<Item = u64>) -> All {
        self.costs = Some(costs.into_iter().collect());
        self
    }

    /// The limits, in the order they were added.
    pub fn limits(&self) -> impl Iterator<Item = (&str, &Policy)> {
        self.limits.iter().map(|(k, p)| (k.as_str(), p))
    }

    option_setters!();
}

impl Command for All {
    type Output = AllDecision;

    fn to_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("RL.ALL");
        cmd.arg(self.limits.len());
        for (key, _) in &self.limits {
            cmd.arg(key);
        }
        for (_, policy) in &self.limits {
            policy.append_words(&mut cmd, true);
        }
        match (&self.costs, self.options.charge) {
            (Some(costs), Charge::Refund(_)) => {
                cmd.arg("REFUND").arg("COSTS").arg(costs);
            }
            (Some(costs), charge) => {
                cmd.arg("COSTS").arg(costs);
                if matches!(charge, Charge::Force(_)) {
                    cmd.arg("FORCE");
                }
            }
            (None, charge) => charge.append(&mut cmd),
        }
        Options {
            charge: Charge::Cost(1),
            ..self.options
        }
        .append(&mut cmd);
        cmd
    }

    fn parse(reply: &Value) -> Result<AllDecision, Error> {
        AllDecision::from_value(reply)
    }

    fn waits(&self) -> Duration {
        self.options.wait.unwrap_or_default()
    }

    fn undo(&self) -> Option<Undo> {
        let refunds = matches!(self.options.charge, Charge::Refund(_));
        // A concurrency limit takes no refund (its leases are released).
        let leases = self
            .limits
            .iter()
            .any(|(_, p)| matches!(p, Policy::Concurrency(_)));
        (!self.options.dryrun && !refunds && !leases).then(|| {
            Undo::all(All {
                limits: self.limits.clone(),
                options: Options {
                    charge: self.options.charge,
                    ..Options::default()
                },
                costs: self.costs.clone(),
            })
        })
    }
}

impl All {
    /// The refund of what this call took, from its reply (`allowed` and
    /// each limit's decision, in order): `None` if it took nothing.
    pub(crate) fn refund(&self, allowed: bool, limits: &[Decision]) -> Option<All> {
        let charge = self.options.charge;
        let costs: Vec<u64> = match &self.costs {
            Some(costs) => costs
                .iter()
                .map(|&c| match charge {
                    Charge::Force(_) => c,
                    _ if allowed => c,
                    _ => 0,
                })
                .collect(),
            None => {
                let each = limits.iter().map(|d| taken(charge, allowed, d.granted));
                each.map(|u| u.unwrap_or(0)).collect()
            }
        };
        if costs.iter().all(|&c| c == 0) {
            return None;
        }
        let refund = All {
            limits: self.limits.clone(),
            options: Options::default(),
            costs: Some(costs),
        };
        Some(refund.charge(Charge::Refund(0)))
    }
}

/// `RL.SKETCH key item limit window`: the same limit for every item, in one
/// count-min sketch.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sketch {
    /// The sketch's key.
    pub key: String,
    /// The item counted (a user, an IP, ...).
    pub item: Vec<u8>,
    /// What each item may use per window.
    pub limit: u64,
    /// The window.
    pub window: Duration,
    /// `WIDTH`: counters per row (the server's default when `None`).
    pub width: Option<u32>,
    /// `DEPTH`: rows (the server's default when `None`).
    pub depth: Option<u32>,
    options: Options,
}

impl Sketch {
    /// `limit` per `window` for `item`, counted in the sketch at `key`.
    pub fn new(
        key: impl Into<String>,
        item: impl Into<Vec<u8>>,
        limit: u64,
        window: Duration,
    ) -> Sketch {
        Sketch {
            key: key.into(),
            item: item.into(),
            limit,
            window,
            width: None,
            depth: None,
            options: Options::default(),
        }
    }

    /// `WIDTH w`: counters per row (more: fewer overcounts).
    pub fn width(mut self, width: u32) -> Sketch {
        self.width = Some(width);
        self
    }

    /// `DEPTH d`: rows (more: fewer overcounts).
    pub fn depth(mut self, depth: u32) -> Sketch {
        self.depth = Some(depth);
        self
    }

    /// `COST n` (default 1).
    pub fn cost(mut self, n: u64) -> Sketch {
        self.options.charge = Charge::Cost(n);
        self
    }

    /// `DRYRUN`: the decision, charging nothing.
    pub fn dryrun(mut self) -> Sketch {
        self.options.dryrun = true;
        self
    }
}

impl Command for Sketch {
    type Output = Decision;

    fn to_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("RL.SKETCH");
        cmd.arg(&self.key)
            .arg(&self.item)
            .arg(self.limit)
            .arg(duration_arg(self.window));
        if let Some(w) = self.width {
            cmd.arg("WIDTH").arg(w);
        }
        if let Some(d) = self.depth {
            cmd.arg("DEPTH").arg(d);
        }
        self.options.append(&mut cmd);
        cmd
    }

    fn parse(reply: &Value) -> Result<Decision, Error> {
        Decision::from_value(reply)
    }
}

/// `RL.PEEK key policy`: a read-only look at a limiter.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Peek {
    /// The key the limit is kept at.
    pub key: String,
    /// The limit.
    pub policy: Policy,
}

impl Peek {
    /// The state of `policy` on `key`, changing nothing (`RL.PEEK`).
    pub fn new(key: impl Into<String>, policy: impl Into<Policy>) -> Peek {
        Peek {
            key: key.into(),
            policy: policy.into(),
        }
    }
}

impl Command for Peek {
    type Output = Decision;

    fn to_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("RL.PEEK");
        cmd.arg(&self.key);
        self.policy.append_words(&mut cmd, true);
        cmd
    }

    fn parse(reply: &Value) -> Result<Decision, Error> {
        Decision::from_value(reply)
    }
}

/// `RL.RELEASE key lease`: `true` if the lease was held.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Release {
    /// The concurrency limit's key.
    pub key: String,
    /// The lease to give back.
    pub lease: LeaseId,
}

impl Release {
    /// Gives `lease` on `key` back (a [`crate::LeaseGuard`] does it when
    /// released or dropped).
    pub fn new(key: impl Into<String>, lease: LeaseId) -> Release {
        Release {
            key: key.into(),
            lease,
        }
    }
}

impl Command for Release {
    type Output = bool;

    fn to_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("RL.RELEASE");
        cmd.arg(&self.key).arg(&self.lease.0);
        cmd
    }

    fn parse(reply: &Value) -> Result<bool, Error> {
        one_or_zero(reply)
    }
}

/// `RL.RENEW key lease ttl`: `true` if the lease now ends `ttl` from now.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Renew {
    /// The concurrency limit's key.
    pub key: String,
    /// The lease to extend.
    pub lease: LeaseId,
    /// Its new time to live, from now.
    pub ttl: Duration,
}

impl Renew {
    /// Extends `lease` on `key` to end `ttl` from now.
    pub fn new(key: impl Into<String>, lease: LeaseId, ttl: Duration) -> Renew {
        Renew {
            key: key.into(),
            lease,
            ttl,
        }
    }
}

impl Command for Renew {
    type Output = bool;

    fn to_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("RL.RENEW");
        cmd.arg(&self.key)
            .arg(&self.lease.0)
            .arg(duration_arg(self.ttl));
        cmd
    }

    fn parse(reply: &Value) -> Result<bool, Error> {
        one_or_zero(reply)
    }
}

fn one_or_zero(reply: &Value) -> Result<bool, Error> {
    match reply {
        Value::Int(1) | Value::Boolean(true) => Ok(true),
        Value::Int(0) | Value::Boolean(false) => Ok(false),
        other => Err(Error::Reply(format!("expected 0 or 1, got {other:?}"))),
    }
}

/// `CL.THROTTLE key max_burst count period [quantity]`, redis-cell's
/// command: `count` per `period` in whole seconds (rounded up), bursts of
/// `max_burst + 1`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Throttle {
    /// The key the limit is kept at.
    pub key: String,
    /// The burst, less one.
    pub max_burst: u64,
    /// Requests per `period`.
    pub count: u64,
    /// The period (whole seconds, rounded up).
    pub period: Duration,
    /// What this request costs (default 1).
    pub quantity: u64,
}

impl Throttle {
    /// `count` per `period` on `key`, bursts of `max_burst + 1`.
    pub fn new(key: impl Into<String>, max_burst: u64, count: u64, period: Duration) -> Throttle {
        Throttle {
            key: key.into(),
            max_burst,
            count,
            period,
            quantity: 1,
        }
    }

    /// What the request takes (0 peeks).
    pub fn quantity(mut self, quantity: u64) -> Throttle {
        self.quantity = quantity;
        self
    }
}

impl Command for Throttle {
    type Output = ThrottleDecision;

    fn to_cmd(&self) -> redis::Cmd {
        self.with_quantity(self.quantity)
    }

    fn parse(reply: &Value) -> Result<ThrottleDecision, Error> {
        ThrottleDecision::from_value(reply)
    }

    fn undo(&self) -> Option<Undo> {
        Undo::throttle(self)
    }
}

impl Throttle {
    /// The command with `quantity` (negative: given back).
    fn with_quantity(&self, quantity: impl redis::ToRedisArgs) -> redis::Cmd {
        let seconds = self.period.as_nanos().div_ceil(1_000_000_000);
        let mut cmd = redis::cmd("CL.THROTTLE");
        cmd.arg(&self.key)
            .arg(self.max_burst)
            .arg(self.count)
            .arg(u64::try_from(seconds).unwrap_or(u64::MAX))
            .arg(quantity);
        cmd
    }

    /// The same limit with a negative quantity, which gives back what this
    /// call took if it was admitted: `None` for a peek (`quantity` 0) or a
    /// quantity the server refuses (above `i64::MAX`).
    pub(crate) fn give_back(&self) -> Option<redis::Cmd> {
        let quantity = i64::try_from(self.quantity).ok().filter(|&q| q > 0)?;
        Some(self.with_quantity(-quantity))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Gcra, Sliding};

    fn words(cmd: redis::Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => "<other>".into(),
            })
            .collect()
    }

    #[test]
    fn commands_spell_the_reference_syntax() {
        let second = Duration::from_secs(1);
        let gcra = Decide::new("k", Gcra::new(10, second).burst(20))
            .charge(Charge::Partial(5))
            .wait(Duration::from_millis(1500));
        assert_eq!(
            words(gcra.to_cmd()).join(" "),
            "RL.GCRA k 10 1000ms BURST 20 COST 5 PARTIAL WAIT 1500ms"
        );
        let all = All::new()
            .limit("a", Gcra::new(10, second))
            .limit("b", Sliding::new(5, 60 * second).approx())
            .costs([1, 300])
            .dryrun();
        assert_eq!(
            words(all.to_cmd()).join(" "),
            "RL.ALL 2 a b GCRA 10 1000ms SLIDING 5 60000ms APPROX COSTS 1 300 DRYRUN"
        );
        let refund = All::new()
            .limit("a", Gcra::new(10, second))
            .charge(Charge::Refund(2));
        assert_eq!(
            words(refund.to_cmd()).join(" "),
            "RL.ALL 1 a GCRA 10 1000ms REFUND 2"
        );
        assert_eq!(
            words(acquire("g", 2, 30 * second).cost(1).to_cmd()).join(" "),
            "RL.ACQUIRE g 2 30000ms"
        );
        assert_eq!(
            words(Throttle::new("t", 15, 30, Duration::from_millis(59_500)).to_cmd()).join(" "),
            "CL.THROTTLE t 15 30 60 1"
        );
    }

    #[test]
    fn a_throttle_gives_back_with_a_negative_quantity() {
        let call = Throttle::new("t", 15, 30, Duration::from_secs(60)).quantity(3);
        assert_eq!(
            words(call.give_back().unwrap()).join(" "),
            "CL.THROTTLE t 15 30 60 -3"
        );
        // A peek takes nothing; a quantity the server refuses took nothing.
        assert!(call.clone().quantity(0).give_back().is_none());
        assert!(call.clone().quantity(0).undo().is_none());
        assert!(call.quantity(u64::MAX).give_back().is_none());
    }
}

/// `RL.HOTKEYS COUNT n`: the keys with the most decisions, most first,
/// each with its decisions per second and the error of that count (per
/// second), as the server lists them (a key by its first 64 bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HotKeys {
    /// At most this many keys (the server takes 1 to 1000).
    pub count: usize,
}

impl HotKeys {
    /// The `count` hottest keys.
    pub fn new(count: usize) -> HotKeys {
        HotKeys { count }
    }
}

/// A key `RL.HOTKEYS` names.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HotKey {
    /// The key (its first 64 bytes).
    pub key: String,
    /// Its decisions per second, over-counted by at most `error_per_second`.
    pub per_second: u64,
    /// The bound on the over-count.
    pub error_per_second: u64,
}

impl Command for HotKeys {
    type Output = Vec<HotKey>;

    fn to_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("RL.HOTKEYS");
        cmd.arg("COUNT").arg(self.count);
        cmd
    }

    fn parse(reply: &Value) -> Result<Vec<HotKey>, Error> {
        let shape = || Error::Reply(format!("expected [[key, rate, error], ...], got {reply:?}"));
        let Value::Array(rows) = reply else {
            return Err(shape());
        };
        let number = |v: &Value| match v {
            Value::Int(n) => u64::try_from(*n).map_err(|_| shape()),
            _ => Err(shape()),
        };
        rows.iter()
            .map(|row| match row {
                Value::Array(row) if row.len() == 3 => {
                    let key = match &row[0] {
                        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                        Value::SimpleString(s) => s.clone(),
                        _ => return Err(shape()),
                    };
                    Ok(HotKey {
                        key,
                        per_second: number(&row[1])?,
                        error_per_second: number(&row[2])?,
                    })
                }
                _ => Err(shape()),
            })
            .collect()
    }
}
