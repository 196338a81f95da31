//! The thin shell around the core: everything that touches the Redis module
//! API lives under this module, and only here is `unsafe` code (the crate
//! root denies it everywhere else). The rest of the crate reaches Redis
//! through the safe functions exported here.

mod acl;
mod aux_type;
pub mod clock;
mod cluster_nodes;
mod config;
mod denies;
mod ffi;
mod heap;
mod host;
mod info;
pub mod key;
mod leases;
mod load;
mod policies;
mod register;
pub mod reply;
pub mod stats;
mod version;
pub mod wait;
