//! Leases held far away, on a server that now serves them with no binding
//! (a promoted replica, a restart from the AOF): each gets its ttl from
//! now, as docs/commands.md's "at most ttl-ms after the new master starts serving"
//! asks. Found by one pass over the keyspace, a slice per timer turn, so
//! that a large keyspace never stalls the server; until its turn comes a
//! lease is simply still held.

use std::cell::{Cell, RefCell};
use std::os::raw::c_void;
use std::sync::atomic::Ordering;

use redis_module::{raw, Context, RedisString};

use crate::core::keep::KEPT_BASE;
use crate::glue::blocking;
use crate::glue::server::now_ms;
use crate::glue::types;

/// Gives each lease held far away at `name` (selected database) its ttl
/// from `now`, and sends that.
pub type Thaw = fn(&Context, &RedisString, i64);

/// Keys looked at per timer turn.
const SLICE: usize = 2000;

struct Pass {
    db: i32,
    cursor: *mut raw::RedisModuleScanCursor,
}

thread_local! {
    static TIMER: blocking::OneShot = const { blocking::OneShot::new() };
    static THAW: Cell<Option<Thaw>> = const { Cell::new(None) };
    static PASS: RefCell<Option<Pass>> = const { RefCell::new(None) };
    /// Keys a far deadline reached while this server is a master (an atomic
    /// slot migration's stream): thawed once this node may touch them.
    static NOTED: RefCell<Vec<(i32, Vec<u8>)>> = const { RefCell::new(Vec::new()) };
}

/// How soon noted keys of a slot still being imported are looked at again.
const RETRY_MS: i64 = 100;

/// A far deadline reached `key` in database `db` of this master.
pub fn note(db: i32, key: &[u8]) {
    NOTED.with(|n| n.borrow_mut().push((db, key.to_vec())));
    TIMER.with(|t| t.arm(now_ms()));
}

/// Slots moved: noted keys may be this node's now.
pub fn slots_changed() {
    if NOTED.with(|n| !n.borrow().is_empty()) {
        TIMER.with(|t| t.arm(now_ms()));
    }
}

/// Thaws the noted keys this node may touch now; true if some must wait.
fn thaw_noted(ctx: &Context, thaw: Thaw) -> bool {
    let noted = NOTED.with(|n| std::mem::take(&mut *n.borrow_mut()));
    let now = now_ms();
    let mut later = Vec::new();
    for (db, key) in noted {
        if !crate::glue::waiting::may_touch(ctx, &key) {
            later.push((db, key));
            continue;
        }
        blocking::in_db(ctx, db, || {
            thaw(ctx, &RedisString::create_from_slice(ctx.ctx, &key), now)
        });
    }
    let wait = !later.is_empty();
    NOTED.with(|n| n.borrow_mut().extend(later));
    wait
}

pub fn init(ctx: &Context, thaw: Thaw) {
    TIMER.with(|t| t.init(ctx, fire));
    THAW.set(Some(thaw));
    blocking::subscribe(ctx, raw::REDISMODULE_EVENT_LOADING, on_loading);
}

/// This server now serves what it holds: a pass starts (again, from the
/// first database, when one was under way).
pub fn start() {
    if !any_values() {
        return;
    }
    PASS.with(|p| {
        let mut p = p.borrow_mut();
        match p.as_mut() {
            Some(pass) => {
                pass.db = 0;
                // SAFETY: a cursor made below and not yet destroyed.
                unsafe { rm!(RedisModule_ScanCursorRestart)(pass.cursor) };
            }
            None => {
                // SAFETY: plain constructor.
                let cursor = unsafe { rm!(RedisModule_ScanCursorCreate)() };
                *p = Some(Pass { db: 0, cursor });
            }
        }
    });
    TIMER.with(|t| t.arm(now_ms()));
}

/// Whether padlock holds any value at all (else there is nothing to find).
pub fn any_values() -> bool {
    macro_rules! any {
        ($($t:ty),*) => {
            false $(|| <$t as types::Value>::INFO.values.load(Ordering::Relaxed) > 0)*
        };
    }
    types::with_kinds!(any)
}

/// What the scan callback gathers: names of padlock keys held far away.
struct Found {
    seen: usize,
    names: Vec<Vec<u8>>,
}

unsafe extern "C" fn visit(
    _ctx: *mut raw::RedisModuleCtx,
    name: *mut raw::RedisModuleString,
    key: *mut raw::RedisModuleKey,
    data: *mut c_void,
) {
    // SAFETY: `data` is the `Found` passed to RedisModule_Scan below.
    let Some(found) = (unsafe { (data as *mut Found).as_mut() }) else {
        return;
    };
    found.seen += 1;
    if key.is_null() || name.is_null() {
        return;
    }
    // SAFETY: an open key and its name, alive during the callback.
    unsafe {
        if rm!(RedisModule_KeyType)(key) != raw::REDISMODULE_KEYTYPE_MODULE as i32 {
            return;
        }
        let mt = rm!(RedisModule_ModuleTypeGetType)(key);
        let value = rm!(RedisModule_ModuleTypeGetValue)(key);
        let Some(stored) = types::stored(mt, value) else {
            return;
        };
        if rm!(RedisModule_GetAbsExpire)(key) < KEPT_BASE && !stored.holds_kept() {
            return;
        }
        let mut len = 0;
        let p = rm!(RedisModule_StringPtrLen)(name, &mut len);
        found
            .names
            .push(std::slice::from_raw_parts(p as *const u8, len).to_vec());
    }
}

unsafe extern "C" fn fire(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    TIMER.with(|t| t.fired());
    let ctx = Context::new(ctx);
    crate::glue::guard::call((), || {
        if !blocking::is_master(&ctx) {
            NOTED.with(|n| n.borrow_mut().clear());
            return stop();
        }
        if !blocking::may_write(&ctx) {
            return TIMER.with(|t| t.arm(now_ms() + blocking::PAUSED_POLL_MS));
        }
        let waiting = THAW.get().is_some_and(|thaw| thaw_noted(&ctx, thaw));
        if step(&ctx) {
            TIMER.with(|t| t.arm(now_ms()));
        } else if waiting {
            TIMER.with(|t| t.arm(now_ms() + RETRY_MS));
        }
        crate::glue::waiting::serve_ready(&ctx);
    });
}

/// One slice of the pass; true while there is more.
fn step(ctx: &Context) -> bool {
    let Some((db, cursor)) = PASS.with(|p| p.borrow().as_ref().map(|p| (p.db, p.cursor))) else {
        return false;
    };
    let Some(thaw) = THAW.get() else {
        return false;
    };
    let mut found = Found {
        seen: 0,
        names: Vec::new(),
    };
    // SAFETY: live context; a database index is checked by SelectDb.
    let before = blocking::selected_db(ctx);
    if unsafe { rm!(RedisModule_SelectDb)(ctx.ctx, db) } != raw::REDISMODULE_OK as i32 {
        stop();
        return false;
    }
    let mut more = true;
    while more && found.seen < SLICE {
        // SAFETY: the cursor lives in PASS; `found` outlives the call.
        more = unsafe {
            rm!(RedisModule_Scan)(
                ctx.ctx,
                cursor,
                Some(visit),
                &mut found as *mut Found as *mut c_void,
            )
        } != 0;
    }
    let now = now_ms();
    for name in &found.names {
        thaw(ctx, &RedisString::create_from_slice(ctx.ctx, name), now);
    }
    // SAFETY: as above, back to what was selected.
    unsafe { rm!(RedisModule_SelectDb)(ctx.ctx, before) };
    if !more {
        PASS.with(|p| {
            if let Some(p) = p.borrow_mut().as_mut() {
                p.db += 1;
                // SAFETY: the live cursor.
                unsafe { rm!(RedisModule_ScanCursorRestart)(p.cursor) };
            }
        });
    }
    true
}

fn stop() {
    PASS.with(|p| {
        if let Some(pass) = p.borrow_mut().take() {
            // SAFETY: made in `start`, destroyed once.
            unsafe { rm!(RedisModule_ScanCursorDestroy)(pass.cursor) };
        }
    });
}

/// Loading ended: a master thaws what it loaded.
unsafe extern "C" fn on_loading(
    ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_LOADING_ENDED {
        return;
    }
    let ctx = Context::new(ctx);
    crate::glue::guard::call((), || {
        if blocking::is_master(&ctx) {
            start();
        }
    });
}
