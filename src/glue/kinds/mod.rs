//! One home per lock kind: how a kind's rules (`core`) meet its keys. Each
//! file decides on the stored value, writes through the one commit step
//! (`commit`), and offers its blocking requests to the waiting engine as
//! `waiting::Want`s. Commands parse and reply; the engine queues and hands
//! off; neither knows what a grant means for a kind.

pub mod effect;
mod leased;
pub mod lock;
pub mod rwlock;
pub mod sem;
