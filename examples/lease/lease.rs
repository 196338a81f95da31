//! A process-local lease manager: takes blocks of up to `k` units from one
//! limiter with `COST k PARTIAL`, admits from its block without a round
//! trip, and gives back what it did not use with `REFUND` when idle or on
//! shutdown. With its block spent it answers "no" locally until its next
//! call is due.
//!
//! Pacing: a call gets what accrued since anyone's last call, so when the
//! limit is contended a manager that called as soon as its block ran out
//! would get blocks of one or two units. Each manager therefore spaces its
//! calls by what its last call earned: having got `m` of `k` units after a
//! gap `g`, it calls again after `g × k / m` (after a denial: twice the gap,
//! and not before `retry_after_ms`); each full block shortens the spacing by
//! a tenth, so a manager takes its share again when others go quiet.

use std::time::{Duration, Instant};

/// One limiter, as its decision command's words after the key.
#[derive(Clone)]
pub struct Limit {
    pub key: String,
    /// e.g. `["RL.GCRA", "2000", "1s", "BURST", "100"]`: name first.
    pub policy: Vec<String>,
}

/// The longest a manager waits between calls.
const MAX_GAP: Duration = Duration::from_secs(1);

pub struct Lease {
    conn: redis::Connection,
    limit: Limit,
    /// Units to ask for per call.
    block: u64,
    /// Units leased and not yet spent.
    held: u64,
    last_used: Instant,
    /// With the block spent, no call before then: answer locally.
    next_call: Instant,
    /// When the last call was sent, and the spacing it set.
    last_call: Option<Instant>,
    gap: Duration,
    /// Store commands sent.
    pub commands: u64,
}

impl Lease {
    pub fn new(conn: redis::Connection, limit: Limit, block: u64) -> Lease {
        Lease {
            conn,
            limit,
            block: block.max(1),
            held: 0,
            last_used: Instant::now(),
            next_call: Instant::now(),
            last_call: None,
            gap: Duration::ZERO,
            commands: 0,
        }
    }

    fn call(&mut self, extra: &[String]) -> redis::RedisResult<Vec<i64>> {
        self.commands += 1;
        let mut cmd = redis::cmd(&self.limit.policy[0]);
        cmd.arg(&self.limit.key)
            .arg(&self.limit.policy[1..])
            .arg(extra);
        cmd.query(&mut self.conn)
    }

    /// Admits one request, locally when it can. `Err` only when the store
    /// fails.
    pub fn acquire(&mut self) -> redis::RedisResult<bool> {
        let now = Instant::now();
        self.last_used = now;
        if self.held > 0 {
            self.held -= 1;
            return Ok(true);
        }
        if now < self.next_call {
            return Ok(false);
        }
        let block = self.block.to_string();
        let reply = self.call(&["COST".into(), block, "PARTIAL".into()])?;
        // [allowed, limit, remaining, retry_after_ms, reset_after_ms, granted]
        let granted = reply.get(5).copied().unwrap_or(0).max(0) as u64;
        let since = self.last_call.map_or(Duration::ZERO, |t| now - t);
        self.last_call = Some(now);
        self.gap = if granted == 0 {
            let retry = Duration::from_millis(reply.get(3).copied().unwrap_or(1).max(1) as u64);
            (since * 2).max(retry)
        } else if granted < self.block {
            since.mul_f64(self.block as f64 / granted as f64)
        } else {
            // A full block: shorten the spacing by a tenth (of the spacing,
            // not of the time since, which includes the caller's own delays).
            self.gap.mul_f64(0.9)
        }
        .min(MAX_GAP);
        self.next_call = now + self.gap;
        if granted == 0 {
            return Ok(false);
        }
        self.held = granted - 1;
        Ok(true)
    }

    /// When the next call is due, while the block is spent.
    pub fn blocked_until(&self) -> Option<Instant> {
        (self.held == 0).then_some(self.next_call)
    }

    /// Gives back the unspent units if unused for `idle`.
    pub fn release_if_idle(&mut self, idle: Duration) -> redis::RedisResult<()> {
        if self.held > 0 && self.last_used.elapsed() >= idle {
            self.release()?;
        }
        Ok(())
    }

    /// Gives back every unspent unit.
    pub fn release(&mut self) -> redis::RedisResult<()> {
        if self.held > 0 {
            let held = std::mem::take(&mut self.held);
            self.call(&["REFUND".into(), held.to_string()])?;
        }
        Ok(())
    }
}
