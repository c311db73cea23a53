//! The one commit step every change of every kind goes through: write the
//! key, replicate the effect, count, send the keyspace event, and mark the
//! key ready for the waiting engine (served at the end of the command or
//! timer pass). A kind says how its effect is written (`Write`); the order
//! and the rest are the same for all.

use std::ffi::CStr;
use std::sync::atomic::AtomicU64;

use redis_module::{Context, RedisString};

use super::info::bump;
use super::key::Key;
use super::server::notify;
use super::waiting;

/// A decided change of one key, ready to be stored.
pub trait Write {
    /// Stores the change in the open key and replicates exactly it.
    fn write(self, ctx: &Context, name: &RedisString, key: &mut Key);
}

/// What a change means beyond the key itself.
#[derive(Default)]
pub struct Note<'a> {
    pub counter: Option<&'static AtomicU64>,
    pub event: Option<&'static CStr>,
    /// The holder that got the key: a wait it declared for it is over.
    pub granted_to: Option<&'a [u8]>,
}

impl<'a> Note<'a> {
    pub fn new(counter: &'static AtomicU64, event: Option<&'static CStr>) -> Note<'a> {
        Note {
            counter: Some(counter),
            event,
            granted_to: None,
        }
    }

    pub fn grant(counter: &'static AtomicU64, event: &'static CStr, holder: &'a [u8]) -> Note<'a> {
        Note {
            counter: Some(counter),
            event: Some(event),
            granted_to: Some(holder),
        }
    }
}

/// Writes, replicates, counts, notifies, marks ready. The key is closed
/// before the waiting engine opens it again.
pub fn commit(ctx: &Context, name: &RedisString, mut key: Key, change: impl Write, note: Note) {
    change.write(ctx, name, &mut key);
    drop(key);
    if let Some(c) = note.counter {
        bump(c);
    }
    if let Some(e) = note.event {
        notify(ctx, e, name);
    }
    if let Some(h) = note.granted_to {
        waiting::acquired(ctx, h, name);
    }
    waiting::after_write(ctx, name);
}
