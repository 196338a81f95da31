//! The thin shell around the core: everything that touches the Redis module
//! API lives under this module, and only here is `unsafe` code (the crate
//! root denies it everywhere else). The rest of the crate reaches Redis
//! through the safe functions exported here.

mod acl;
mod cluster_nodes;
pub mod clock;
mod config;
mod ffi;
mod host;
mod info;
pub mod key;
mod load;
mod policies;
mod register;
pub mod stats;
pub mod reply;
mod version;
pub mod wait;

