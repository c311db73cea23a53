//! Calls from the data-type callbacks up into the waiting engine. The
//! engine reads the data types (who holds a key, when its lease ends), so
//! the types cannot name it; it installs itself here when the module loads.

use std::sync::OnceLock;

static KEY_GONE: OnceLock<fn(&[u8])> = OnceLock::new();

pub fn install(key_gone: fn(&[u8])) {
    let _ = KEY_GONE.set(key_gone);
}

/// A lock or semaphore key was removed by another hand (DEL, UNLINK,
/// expiry, eviction), or its expiry was changed: its waiters need a look.
pub fn key_gone(name: &[u8]) {
    if let Some(f) = KEY_GONE.get() {
        f(name);
    }
}
