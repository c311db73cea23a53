//! Module configuration: load-time arguments and `CONFIG GET/SET padlock.*`.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::core::args::Limits;

pub static MAX_TTL_MS: AtomicI64 = AtomicI64::new(86_400_000);
pub static MAX_HOLDER_LEN: AtomicI64 = AtomicI64::new(512);

/// Bounds for the settings themselves: a ttl up to about 34 years, a holder
/// up to 64 KiB.
pub const MAX_TTL_MS_CEILING: i64 = 1 << 40;
pub const MAX_HOLDER_LEN_CEILING: i64 = 65_536;

pub fn limits() -> Limits {
    Limits {
        max_ttl_ms: MAX_TTL_MS.load(Ordering::Relaxed),
        max_holder_len: MAX_HOLDER_LEN.load(Ordering::Relaxed) as usize,
    }
}
