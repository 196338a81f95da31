//! `COMMAND DOCS` arguments for each command, registered with
//! `RedisModule_SetCommandInfo`. (Filled in by the documentation work.)

use redis_module::raw;
use std::ffi::CStr;

/// The argument list of `command`, terminated by a zeroed entry; `None` when
/// the command declares no arguments.
pub fn args(_command: &CStr) -> Option<Vec<raw::RedisModuleCommandArg>> {
    None
}
