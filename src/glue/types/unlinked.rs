//! The unlink hook: a padlock key removed by some other hand than
//! padlock's own (DEL, expiry, eviction, an overwrite, a rename away) is
//! counted under its kind, its waiters are looked at, and what `KEEP`
//! bound to its holds ends.

use std::cell::{Cell, RefCell};
use std::os::raw::c_void;

use redis_module::raw;

use super::{KindInfo, Value};
use crate::core::since::Since;

thread_local! {
    static ON_PURPOSE: Cell<bool> = const { Cell::new(false) };
    /// The last padlock key removed by someone else (DEL, expiry,
    /// eviction): the expired/evicted event handler matches it to count
    /// and announce it under its kind.
    static LAST_UNLINKED: RefCell<Option<Unlinked>> = const { RefCell::new(None) };
}

/// Runs `f` (a delete padlock itself does) without it counting as a removal
/// by another hand.
pub fn deleting_on_purpose(f: impl FnOnce()) {
    ON_PURPOSE.with(|p| p.set(true));
    f();
    ON_PURPOSE.with(|p| p.set(false));
}

/// A padlock key removed by another hand, as its `expired` / `evicted`
/// event finds it.
pub struct Unlinked {
    name: Vec<u8>,
    pub kind: &'static KindInfo,
    /// Its holds' (start, end) as `Stored::spans` gives them.
    pub spans: Vec<(Since, i64)>,
}

/// Takes the key last removed by another hand, when it is `key`: the
/// `expired` / `evicted` event then counts it under its kind and sends the
/// kind's own event.
pub fn take_unlinked(key: &[u8]) -> Option<Unlinked> {
    LAST_UNLINKED.with(|l| {
        let mut l = l.borrow_mut();
        match l.take() {
            Some(u) if u.name == key => Some(u),
            other => {
                *l = other;
                None
            }
        }
    })
}

/// What every type's `unlink` callback does.
fn unlinked<T: Value>(key: *mut raw::RedisModuleString, value: *const c_void) {
    crate::glue::guard::call((), || {
        if ON_PURPOSE.with(|p| p.get()) {
            return;
        }
        let name = redis_module::RedisString::string_as_slice(key).to_vec();
        crate::glue::timer::note_removed(&name);
        // SAFETY: Redis passes the value of a key of T's type (a Box<T>).
        let spans = unsafe { (value as *const T).as_ref() }.map_or_else(Vec::new, |v| v.spans());
        LAST_UNLINKED.with(|l| {
            if let Ok(mut l) = l.try_borrow_mut() {
                *l = Some(Unlinked {
                    name,
                    kind: T::INFO,
                    spans,
                });
            }
        });
    })
}

/// Every type's `unlink2` callback (it knows the key's database, which
/// `KEEP` needs: a binding belongs to the hold in that key, and ends with
/// it, whoever removed it).
pub(crate) extern "C" fn unlink2<T: Value>(
    ctx: *mut raw::RedisModuleKeyOptCtx,
    value: *const c_void,
) {
    crate::glue::guard::call((), || {
        // SAFETY: Redis passes a live option context for this key.
        let (key, db) = unsafe {
            (
                rm!(RedisModule_GetKeyNameFromOptCtx)(ctx),
                rm!(RedisModule_GetDbIdFromOptCtx)(ctx),
            )
        };
        if key.is_null() {
            return;
        }
        let key = key as *mut raw::RedisModuleString;
        let on_purpose = ON_PURPOSE.with(|p| p.get());
        crate::glue::timer::gone(
            db,
            redis_module::RedisString::string_as_slice(key),
            on_purpose,
        );
        unlinked::<T>(key, value);
    })
}
