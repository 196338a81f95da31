//! Placeholder: implemented by its own issue.

use super::Verdict;
use crate::error::Error;
use crate::server::ffi::{Arg, Ctx};

pub fn run(_ctx: Ctx, _args: &[Arg]) -> Result<Verdict, Error> {
    Err(Error::Internal("not implemented yet"))
}
