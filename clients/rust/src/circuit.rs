//! The circuit: once a call finds the store unavailable (no answer within
//! its timeout, or the connection failed), calls are not sent but fail at
//! once with [`Error::StoreDown`], so that each decision answers its
//! fallback without waiting. While open, a call arriving at least
//! [`PROBE_INTERVAL`] after the last probe started sends a `PING` in the
//! background (one at a time, bounded by the client's timeout); its
//! answer, or the answer to any other call, closes the circuit.
//!
//! Closed, the only cost is one atomic load per call.

use crate::Error;
use redis::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// While the store is known down, how often calls start a probe (a `PING`
/// in the background) to learn whether it is back.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(200);

/// Whether the store is known down, shared by a client's clones.
#[derive(Debug, Default)]
pub(crate) struct Circuit {
    /// Read on every call: closed costs one load.
    open: AtomicBool,
    probe: Mutex<Probe>,
}

#[derive(Debug, Default)]
struct Probe {
    /// When the last probe started (`None`: none since the circuit opened).
    started: Option<Instant>,
    in_flight: bool,
}

impl Circuit {
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// What a call's outcome says of the store: an answer (even an error
    /// reply) closes the circuit, no answer opens it.
    pub fn record<T>(&self, outcome: &Result<T, Error>) {
        match outcome {
            Err(Error::StoreDown) => {}
            Err(e) if e.is_unavailable() => self.trip(),
            _ if self.is_open() => self.open.store(false, Ordering::Release),
            _ => {}
        }
    }

    fn trip(&self) {
        if !self.open.swap(true, Ordering::AcqRel) {
            // Opened now: the first call after it may probe only after the
            // interval, from the failure on.
            let mut probe = self.probe.lock().unwrap_or_else(|p| p.into_inner());
            if !probe.in_flight {
                probe.started = Some(Instant::now());
            }
        }
    }

    /// Whether a call now should start a probe: none in flight, the last
    /// one started at least [`PROBE_INTERVAL`] ago. Marks it in flight.
    fn probe_due(&self, now: Instant) -> bool {
        let mut probe = self.probe.lock().unwrap_or_else(|p| p.into_inner());
        let due = !probe.in_flight
            && probe
                .started
                .is_none_or(|at| now.saturating_duration_since(at) >= PROBE_INTERVAL);
        if due {
            probe.in_flight = true;
            probe.started = Some(now);
        }
        due
    }

    fn probe_ended(&self) {
        let mut probe = self.probe.lock().unwrap_or_else(|p| p.into_inner());
        probe.in_flight = false;
    }

    /// For a blocking connection, called by a call that found the circuit
    /// open: if a probe is due, sends a `PING` on `conn` itself (waiting
    /// at most the connection's own timeout). Whether the store answered
    /// it (the circuit is then closed). The next probe is due
    /// [`PROBE_INTERVAL`] after this one ended: the calls between fail at
    /// once, whatever the connection's timeout.
    pub fn probe_blocking(&self, conn: &mut dyn redis::ConnectionLike) -> bool {
        if !self.probe_due(Instant::now()) {
            return false;
        }
        let answer = redis::cmd("PING").query::<Value>(conn).map_err(Error::from);
        {
            let mut probe = self.probe.lock().unwrap_or_else(|p| p.into_inner());
            probe.in_flight = false;
            probe.started = Some(Instant::now());
        }
        self.record(&answer);
        answer.is_ok()
    }

    /// Called by a call that found the circuit open: starts a probe on
    /// `conn` if one is due (on the current tokio runtime; without one,
    /// none starts and the next call in a runtime probes).
    pub fn probe<C>(self: &Arc<Self>, conn: &C, bound: Duration)
    where
        C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
    {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !self.probe_due(Instant::now()) {
            return;
        }
        let (circuit, mut conn) = (Arc::clone(self), conn.clone());
        runtime.spawn(async move {
            let ping = redis::cmd("PING");
            let answer =
                match tokio::time::timeout(bound, ping.query_async::<Value>(&mut conn)).await {
                    Ok(answer) => answer.map_err(Error::from),
                    Err(_) => Err(Error::Timeout(bound)),
                };
            circuit.probe_ended();
            circuit.record(&answer);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_answer_opens_it_and_any_answer_closes_it() {
        let c = Circuit::default();
        assert!(!c.is_open());
        c.record::<()>(&Ok(()));
        assert!(!c.is_open());
        c.record::<()>(&Err(Error::Timeout(Duration::ZERO)));
        assert!(c.is_open());
        // A call not sent says nothing of the store.
        c.record::<()>(&Err(Error::StoreDown));
        assert!(c.is_open());
        // The store answered, if only with an error.
        c.record::<()>(&Err(Error::Server {
            code: "ERR".into(),
            message: "ERR no".into(),
        }));
        assert!(!c.is_open());
    }

    #[test]
    fn one_probe_at_a_time_and_one_an_interval() {
        let c = Circuit::default();
        c.record::<()>(&Err(Error::Timeout(Duration::ZERO)));
        let t0 = Instant::now();
        // Not before the interval from the failure.
        assert!(!c.probe_due(t0));
        let t1 = t0 + PROBE_INTERVAL;
        assert!(c.probe_due(t1));
        // In flight: no other, however late.
        assert!(!c.probe_due(t1 + 10 * PROBE_INTERVAL));
        c.probe_ended();
        assert!(!c.probe_due(t1 + PROBE_INTERVAL / 2));
        assert!(c.probe_due(t1 + PROBE_INTERVAL));
    }
}
