//! The thin shell around the core: everything that touches the Redis module
//! API lives under this module, and only here is `unsafe` code.

pub mod clock;
pub mod ffi;
pub mod info;
pub mod key;
pub mod reply;
