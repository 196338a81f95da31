//! Fair waiting with any command: clients of named flows start waiting
//! one after another, time moves on the manual clock, and the replies
//! tell how many of each flow were admitted.

use super::blocking::{await_waiting, end_waits, send, waiting};
use super::{advance, Server};
use redis::{Connection, Value};

/// A waiting client and its flow.
struct Waiter {
    conn: Connection,
    id: i64,
    flow: &'static str,
}

/// Clients waiting on one server, in the order they started.
pub struct Flows<'s> {
    server: &'s Server,
    pub ctl: Connection,
    waiters: Vec<Waiter>,
    waiting: u64,
}

impl<'s> Flows<'s> {
    pub fn new(server: &'s Server) -> Flows<'s> {
        Flows {
            server,
            ctl: server.conn(),
            waiters: Vec::new(),
            waiting: 0,
        }
    }

    /// A client sends `command` with `WAIT wait FLOW flow WEIGHT weight`
    /// appended, and waits after every other.
    pub fn offer(&mut self, command: &[&str], flow: &'static str, weight: u64, wait: &str) {
        let mut conn = self.server.conn();
        let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut conn).unwrap();
        let weight = weight.to_string();
        let mut args = command.to_vec();
        args.extend(["WAIT", wait, "FLOW", flow, "WEIGHT", &weight]);
        send(&mut conn, &args);
        self.waiters.push(Waiter { conn, id, flow });
        self.waiting += 1;
        await_waiting(&mut self.ctl, self.waiting);
    }

    /// The clock moves `us` on (the waits due by then end before it
    /// replies): how many waits ended.
    pub fn advance(&mut self, us: u64) -> u64 {
        advance(&mut self.ctl, us);
        let before = self.waiting;
        self.waiting = waiting(&mut self.ctl);
        before - self.waiting
    }

    /// The clock moves `step` at a time until exactly `n` waits have ended.
    pub fn advance_until_ended(&mut self, step: u64, n: u64) {
        let mut ended = 0;
        while ended < n {
            ended += self.advance(step);
        }
        assert_eq!(ended, n);
    }

    /// Offered 10:1: `rounds` times, ten clients of flow `heavy` with
    /// `heavy_call`, then one of flow `light` with `light_call`, all of
    /// weight 1 waiting up to 100 days.
    pub fn offer_ten_to_one(&mut self, heavy_call: &[&str], light_call: &[&str], rounds: usize) {
        for _ in 0..rounds {
            for _ in 0..10 {
                self.offer(heavy_call, "heavy", 1, "100d");
            }
            self.offer(light_call, "light", 1, "100d");
        }
    }

    /// Ends every wait still going ([`end_waits`]) and reads every reply:
    /// how many of each flow were admitted, in order of the flows' first
    /// waiters.
    pub fn admitted_by_flow(mut self) -> Vec<(&'static str, usize)> {
        let ids: Vec<i64> = self.waiters.iter().map(|w| w.id).collect();
        let killed = end_waits(&mut self.ctl, &ids);
        let mut counts: Vec<(&'static str, usize)> = Vec::new();
        for (w, killed) in self.waiters.iter_mut().zip(killed) {
            if counts.iter().all(|c| c.0 != w.flow) {
                counts.push((w.flow, 0));
            }
            if killed {
                continue;
            }
            // A decision's first field (or a combined reply's) is whether
            // it was admitted.
            let allowed = match w.conn.recv_response().expect("reply") {
                Value::Array(items) => items.first() == Some(&Value::Int(1)),
                other => panic!("not a decision: {other:?}"),
            };
            if allowed {
                counts.iter_mut().find(|c| c.0 == w.flow).unwrap().1 += 1;
            }
        }
        counts
    }
}

/// A client that re-sends as soon as it is answered.
struct Looping {
    conn: Connection,
    id: i64,
    args: Vec<String>,
    flow: &'static str,
    admitted: usize,
}

/// Closed-loop clients on one server with the manual clock: each sends its
/// command with `WAIT … FLOW flow WEIGHT w` and, as soon as it is
/// answered, sends it again.
pub struct ClosedLoops<'s> {
    server: &'s Server,
    pub ctl: Connection,
    clients: Vec<Looping>,
}

impl<'s> ClosedLoops<'s> {
    pub fn new(server: &'s Server) -> ClosedLoops<'s> {
        ClosedLoops {
            server,
            ctl: server.conn(),
            clients: Vec::new(),
        }
    }

    /// `n` clients of flow `flow` (weight `weight`) start sending `command`.
    pub fn start(&mut self, n: usize, command: &[&str], flow: &'static str, weight: u64) {
        let weight = weight.to_string();
        let mut args: Vec<String> = command.iter().map(|s| s.to_string()).collect();
        args.extend(["WAIT", "100d", "FLOW", flow, "WEIGHT", &weight].map(String::from));
        for _ in 0..n {
            let mut conn = self.server.conn();
            let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut conn).unwrap();
            let words: Vec<&str> = args.iter().map(String::as_str).collect();
            send(&mut conn, &words);
            self.clients.push(Looping {
                conn,
                id,
                args: args.clone(),
                flow,
                admitted: 0,
            });
            await_waiting(&mut self.ctl, self.clients.len() as u64);
        }
    }

    /// The clock moves `us` on, `steps` times; after each move, every
    /// client answered counts its admission and sends again (its reply
    /// was written before RL.CLOCK's: the same event-loop iteration).
    pub fn run(&mut self, steps: usize, us: u64) {
        for _ in 0..steps {
            advance(&mut self.ctl, us);
            let list: String = redis::cmd("CLIENT")
                .arg("LIST")
                .query(&mut self.ctl)
                .unwrap();
            let blocked: std::collections::HashSet<i64> = list
                .lines()
                .filter(|l| {
                    l.split(' ')
                        .any(|f| f.starts_with("flags=") && f.contains('b'))
                })
                .filter_map(|l| l.strip_prefix("id=")?.split(' ').next()?.parse().ok())
                .collect();
            for c in self.clients.iter_mut().filter(|c| !blocked.contains(&c.id)) {
                let allowed = match c.conn.recv_response().expect("reply") {
                    Value::Array(items) => items.first() == Some(&Value::Int(1)),
                    other => panic!("not a decision: {other:?}"),
                };
                c.admitted += usize::from(allowed);
                let words: Vec<&str> = c.args.iter().map(String::as_str).collect();
                send(&mut c.conn, &words);
            }
            await_waiting(&mut self.ctl, self.clients.len() as u64);
        }
    }

    /// Admissions so far by flow, in the order the flows started.
    pub fn admitted_by_flow(&self) -> Vec<(&'static str, usize)> {
        let mut counts: Vec<(&'static str, usize)> = Vec::new();
        for c in &self.clients {
            match counts.iter_mut().find(|x| x.0 == c.flow) {
                Some(x) => x.1 += c.admitted,
                None => counts.push((c.flow, c.admitted)),
            }
        }
        counts
    }
}
