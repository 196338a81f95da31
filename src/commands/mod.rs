//! The commands: their definitions (`table`), the grammar those are written
//! in and what is derived from it (`grammar`, `docs`), and the handlers.
//! Handlers are safe code: they reach Redis only through `crate::server`.

pub mod clock;
pub mod definition;
pub mod docs;
pub mod grammar;
pub mod lease;
pub mod named;
pub mod policy_command;
pub mod rl_all;
pub mod rl_peek;
pub mod table;
pub mod throttle;

/// What a successful call did, for the statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    Denied,
    /// Not a decision (RL.CLOCK).
    Other,
    /// The client waits (`WAIT`): allowed or denied is counted when it ends.
    Waiting,
}

impl Verdict {
    pub fn of(allowed: bool) -> Verdict {
        if allowed {
            Verdict::Allowed
        } else {
            Verdict::Denied
        }
    }
}
