//! Module configuration: load-time arguments and `CONFIG GET/SET padlock.*`.

use std::sync::atomic::{AtomicI64, Ordering};

use redis_module::configuration::ConfigurationContext;
use redis_module::{ConfigurationValue, RedisError, RedisString};

use crate::core::args::Limits;
use crate::core::error::Error;
use crate::core::grace::Grace;
use crate::core::settings::{self as s, Eviction};

// The settings' current values; names, defaults and ranges are in
// `core::settings`.
pub static MAX_TTL_MS: AtomicI64 = AtomicI64::new(s::MAX_TTL_MS.default);
pub static MAX_HOLDER_LEN: AtomicI64 = AtomicI64::new(s::MAX_HOLDER_LEN_SETTING.default);
pub static MAX_WAITERS_PER_KEY: AtomicI64 = AtomicI64::new(s::MAX_WAITERS_PER_KEY.default);
pub static MAX_WAITERS: AtomicI64 = AtomicI64::new(s::MAX_WAITERS.default);
pub static MAX_WAIT_EDGES: AtomicI64 = AtomicI64::new(s::MAX_WAIT_EDGES.default);
pub static KEEP_MAX_IDLE_MS: AtomicI64 = AtomicI64::new(s::KEEP_MAX_IDLE_MS.default);
pub static KEEP_MIN_INTERVAL_MS: AtomicI64 = AtomicI64::new(s::KEEP_MIN_INTERVAL_MS.default);
pub static ID_MEMORY_MS: AtomicI64 = AtomicI64::new(s::ID_MEMORY_MS.default);
pub static MAX_IDS_PER_HOLDER: AtomicI64 = AtomicI64::new(s::MAX_IDS_PER_HOLDER.default);
pub static MAX_REMEMBERED_IDS: AtomicI64 = AtomicI64::new(s::MAX_REMEMBERED_IDS.default);
pub static MAILBOX_TTL_MS: AtomicI64 = AtomicI64::new(s::MAILBOX_TTL_MS.default);

pub fn limits() -> Limits {
    Limits {
        max_ttl_ms: MAX_TTL_MS.load(Ordering::Relaxed),
        max_holder_len: MAX_HOLDER_LEN.load(Ordering::Relaxed) as usize,
    }
}

/// Parses a command that gives a hold back and stores no holder (a
/// release, a cancel) with holders up to the hard bound: `max-holder-len`
/// bounds the holders that take something, so a hold taken before it was
/// lowered, or on a master whose bound is higher, can still be given back,
/// on the master, on its replicas and from its AOF (a release travels as
/// itself). A holder it refuses (empty, or past 64 KiB) is told the bound
/// in force, as on every other command; one that held nothing,
/// `gave_back`.
pub fn give_back_args<T>(parse: impl FnOnce(&Limits) -> Result<T, Error>) -> Result<T, Error> {
    let wide = Limits {
        max_holder_len: crate::core::bounds::MAX_HOLDER_LEN,
        ..limits()
    };
    parse(&wide).map_err(|e| match e {
        Error::HolderLength { .. } => Error::HolderLength {
            max: limits().max_holder_len,
        },
        e => e,
    })
}

/// A give-back's answer: a holder past `max-holder-len` that held nothing
/// is refused as too long, as every other command refuses it; one that
/// held something gave it back.
pub fn gave_back<T>(holder: &[u8], r: Result<T, Error>) -> Result<T, Error> {
    match r {
        Err(e @ Error::NotHeld { .. }) => within_max_holder(holder).and(Err(e)),
        r => r,
    }
}

/// `max-holder-len`, for a holder that was let past it to give back.
pub fn within_max_holder(holder: &[u8]) -> Result<(), Error> {
    crate::core::args::holder(&holder, &limits()).map(|_| ())
}

/// `restart-grace-ms`: -1 auto, 0 off, n ms.
pub struct GraceSetting(AtomicI64);

pub static RESTART_GRACE: GraceSetting = GraceSetting(AtomicI64::new(0));

/// When the module loaded, or this server was last promoted from replica
/// to master (unix ms): the grace counts from here.
pub static GRACE_FROM_MS: AtomicI64 = AtomicI64::new(0);

/// Starts the restart grace (again) now (`grace::start` also tells the
/// operator).
pub fn start_grace(now_ms: i64) {
    GRACE_FROM_MS.store(now_ms, Ordering::Relaxed);
    super::timer::grace_changed();
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
        let max = s::MAX_TTL_MS.max;
        let g = Grace::parse(val.as_slice(), max).map_err(|_| {
            RedisError::String(format!("restart-grace-ms must be 0 to {max} or auto"))
        })?;
        self.store(g);
        // Logged, and waiters it held back served, when it ends now.
        super::timer::grace_changed();
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

/// `eviction`: `warn` (0) or `refuse` (1).
pub struct EvictionSetting(AtomicI64);

pub static EVICTION: EvictionSetting = EvictionSetting(AtomicI64::new(0));

impl EvictionSetting {
    pub fn get(&self) -> Eviction {
        match self.0.load(Ordering::Relaxed) {
            1 => Eviction::Refuse,
            _ => Eviction::Warn,
        }
    }
}

impl ConfigurationValue<RedisString> for EvictionSetting {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        RedisString::create_from_slice(
            std::ptr::null_mut(),
            EvictionSetting::get(self).name().as_bytes(),
        )
    }

    fn set(&self, _ctx: &ConfigurationContext, val: RedisString) -> Result<(), RedisError> {
        let e = Eviction::parse(val.as_slice())
            .ok_or(RedisError::Str("eviction must be warn or refuse"))?;
        self.0
            .store(i64::from(e == Eviction::Refuse), Ordering::Relaxed);
        Ok(())
    }
}
