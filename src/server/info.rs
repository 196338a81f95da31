//! The `INFO ratelimit` section. (Filled in by the observability work.)

use super::ffi::Ctx;

/// Registers the INFO callback at load.
pub fn register(_ctx: Ctx) -> Result<(), String> {
    Ok(())
}
