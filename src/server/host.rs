//! The server as the handlers' [`Host`]: one call's context, its keys, the
//! limiter clock and the waiting queue.

use super::ffi::{self, Arg, Ctx};
use super::key::RedisStore;
use super::{clock, wait};
use crate::algorithm::Micros;
use crate::commands::{Host, Shape};
use crate::engine::gate::Gated;
use crate::engine::{deny, hot};
use crate::engine::{KeyError, Outcome, Request};
use crate::policy::Policy;
use std::cell::Cell;

/// One call of command `command` (its place in the command table).
pub struct ServerHost {
    pub ctx: Ctx,
    pub command: usize,
    /// The limiter clock, read once per call: a decision and what is
    /// counted of it see the same time.
    now: Cell<Option<Micros>>,
}

impl ServerHost {
    pub fn new(ctx: Ctx, command: usize) -> ServerHost {
        ServerHost {
            ctx,
            command,
            now: Cell::new(None),
        }
    }
}

impl Host for ServerHost {
    type Arg = Arg;
    type Store<'h> = RedisStore;

    fn now(&self) -> Micros {
        let now = self.now.get().unwrap_or_else(clock::now);
        self.now.set(Some(now));
        now
    }

    fn open(&mut self, keys: &[Arg], read_only: bool) -> RedisStore {
        if read_only {
            RedisStore::open_read(self.ctx, keys)
        } else {
            RedisStore::open(self.ctx, keys)
        }
    }

    // Kept out of line, with the gate's call last: the outcome is written
    // once, where the caller reads it, rather than moved out of a branch.
    #[inline(never)]
    fn decide(
        &mut self,
        shape: Shape,
        keys: &[Arg],
        policies: &[Policy],
        request: &Request,
    ) -> Result<Gated, KeyError> {
        let now = self.now();
        if hot::is_on() {
            hot::count(keys, now);
        }
        if !deny::is_empty() {
            if let Some(denied) = deny::screen(keys, policies, now) {
                return Ok(Gated::Now(denied));
            }
        }
        wait::decide(self.ctx, self.command, shape, keys, policies, now, request)
    }

    fn behind_line(
        &mut self,
        keys: &[Arg],
        policies: &[Policy],
        now: Micros,
        request: Request,
    ) -> Option<Result<Outcome, KeyError>> {
        wait::behind_line(self.ctx, keys, policies, now, request)
    }

    fn key_freed(&mut self, key: &Arg) {
        wait::key_freed(self.ctx, key);
    }

    fn clock_is_manual(&self) -> bool {
        clock::is_manual()
    }

    fn set_clock(&mut self, to: Micros) {
        let from = clock::now();
        clock::set(to);
        self.now.set(Some(clock::now()));
        wait::clock_moved(self.ctx, from, to);
    }

    fn replicate_verbatim(&mut self) {
        ffi::replicate_verbatim(self.ctx);
    }

    fn replicate(&mut self, command: &str, args: &[&[u8]]) {
        ffi::replicate(self.ctx, command, args);
    }
}
