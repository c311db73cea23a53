//! Module configuration: load-time arguments and `CONFIG GET/SET padlock.*`.

use std::sync::atomic::{AtomicI64, Ordering};

use redis_module::configuration::ConfigurationContext;
use redis_module::{ConfigurationValue, RedisError, RedisString};

use crate::core::args::Limits;
use crate::core::grace::Grace;

pub static MAX_TTL_MS: AtomicI64 = AtomicI64::new(86_400_000);
pub static MAX_HOLDER_LEN: AtomicI64 = AtomicI64::new(512);
/// Most clients blocked on one key, and on the whole server: a wait past
/// either is refused with an error instead of growing without bound.
pub static MAX_WAITERS_PER_KEY: AtomicI64 = AtomicI64::new(10_000);
pub static MAX_WAITERS: AtomicI64 = AtomicI64::new(100_000);
pub const MAX_WAITERS_CEILING: i64 = 100_000_000;

/// Bounds for the settings themselves: a ttl up to about 34 years, a holder
/// up to 64 KiB.
pub const MAX_TTL_MS_CEILING: i64 = 1 << 40;
pub const MAX_HOLDER_LEN_CEILING: i64 = crate::core::stored::MAX_HOLDER_LEN as i64;

pub fn limits() -> Limits {
    Limits {
        max_ttl_ms: MAX_TTL_MS.load(Ordering::Relaxed),
        max_holder_len: MAX_HOLDER_LEN.load(Ordering::Relaxed) as usize,
    }
}

/// `restart-grace-ms`: -1 auto, 0 off, n ms.
pub struct GraceSetting(AtomicI64);

pub static RESTART_GRACE: GraceSetting = GraceSetting(AtomicI64::new(0));

/// When the module loaded, or this server was last promoted from replica
/// to master (unix ms): the grace counts from here.
pub static GRACE_FROM_MS: AtomicI64 = AtomicI64::new(0);

/// Starts the restart grace (again) now.
pub fn start_grace(now_ms: i64) {
    GRACE_FROM_MS.store(now_ms, Ordering::Relaxed);
}

impl GraceSetting {
    pub fn get(&self) -> Grace {
        match self.0.load(Ordering::Relaxed) {
            -1 => Grace::Auto,
            0 => Grace::Off,
            ms => Grace::Ms(ms),
        }
    }

    fn store(&self, g: Grace) {
        self.0.store(
            match g {
                Grace::Auto => -1,
                Grace::Off => 0,
                Grace::Ms(ms) => ms,
            },
            Ordering::Relaxed,
        );
    }
}

impl ConfigurationValue<RedisString> for GraceSetting {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        RedisString::create_from_slice(
            std::ptr::null_mut(),
            GraceSetting::get(self).render().as_bytes(),
        )
    }

    fn set(&self, _ctx: &ConfigurationContext, val: RedisString) -> Result<(), RedisError> {
        let g = Grace::parse(val.as_slice(), MAX_TTL_MS_CEILING).map_err(|_| {
            RedisError::String(format!(
                "restart-grace-ms must be 0 to {MAX_TTL_MS_CEILING} or auto"
            ))
        })?;
        self.store(g);
        Ok(())
    }
}

/// Is the restart grace still running for a request with this ttl?
pub fn grace_running(now_ms: i64, ttl_ms: i64) -> bool {
    RESTART_GRACE
        .get()
        .running(GRACE_FROM_MS.load(Ordering::Relaxed), ttl_ms, now_ms)
}

/// When the grace ends for a request with this ttl (None: off).
pub fn grace_ends(ttl_ms: i64) -> Option<i64> {
    RESTART_GRACE
        .get()
        .ends_at(GRACE_FROM_MS.load(Ordering::Relaxed), ttl_ms)
}
