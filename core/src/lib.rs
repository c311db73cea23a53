//! padlock's pure core: every rule of the contract (docs/commands.md) as plain Rust, with no Redis
//! types and the clock passed in (`now_ms`), so it is tested without a
//! server. Its public surface is what the module's glue uses.

#![forbid(unsafe_code)]

pub mod args;
pub mod bounds;
pub mod cluster;
pub mod error;
pub mod fence;
pub mod grace;
pub mod hash;
pub mod ids;
pub mod keep;
pub mod leases;
pub mod lock;
pub mod number;
pub mod queue;
pub mod rwlock;
pub mod semaphore;
pub mod settings;
pub mod since;
pub mod stored;
pub mod syntax;
pub mod waiters;
pub mod waitgraph;
