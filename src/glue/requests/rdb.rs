//! Remembered request-ids in the RDB (saved whole after the keys, `aux`),
//! in a rewritten AOF (after each key's value: also what Valkey's atomic
//! slot migration ships) and ahead of a Redis 8.x slot migration's
//! snapshot (which ships values alone), as `PADLOCK.REQUESTID` effects.

use std::os::raw::{c_char, c_int};
use std::ptr::null_mut;

use redis_module::{raw, RedisString};

use super::memory::{bounds, with};
use crate::core::ids::{self, Address, Answer, Remembered};

pub const NAME: &std::ffi::CStr = c"padlock.requestid";

/// The effect's arguments, as byte strings.
pub fn words(at: &Address, id: &[u8], r: Option<&Remembered>) -> Vec<Vec<u8>> {
    let mut w: Vec<Vec<u8>> = vec![at.key().to_vec(), at.holder().to_vec(), id.to_vec()];
    let Some(r) = r else {
        w.push(b"FORGET".to_vec());
        return w;
    };
    w.push(r.at_ms.to_string().into_bytes());
    w.push((r.print as i64).to_string().into_bytes());
    match &r.answer {
        Answer::Int(v) => {
            w.push(b"I".to_vec());
            w.push(v.to_string().into_bytes());
        }
        Answer::Ints(vs) => {
            w.push(b"A".to_vec());
            w.extend(vs.iter().map(|v| v.to_string().into_bytes()));
        }
    }
    w
}

/// Calls `f` with the words as Redis strings (freed after).
pub fn with_strings(
    ctx: *mut raw::RedisModuleCtx,
    w: &[Vec<u8>],
    f: impl FnOnce(&mut [*mut raw::RedisModuleString]),
) {
    let mut strings: Vec<*mut raw::RedisModuleString> = w
        .iter()
        // SAFETY: new strings, freed below.
        .map(|b| unsafe {
            rm!(RedisModule_CreateString)(null_mut(), b.as_ptr() as *const c_char, b.len())
        })
        .collect();
    f(&mut strings);
    for s in strings {
        // SAFETY: made above, without a context; Redis took its own references.
        unsafe { rm!(RedisModule_FreeString)(null_mut(), s) };
    }
    let _ = ctx;
}

/// An AOF rewrite: the ids remembered for this key, after its value.
pub fn emit_for_key(aof: *mut raw::RedisModuleIO, key: *mut raw::RedisModuleString) {
    // SAFETY: live IO handle and key name of the rewrite.
    let (db, name) = unsafe {
        (
            rm!(RedisModule_GetDbIdFromIO)(aof),
            RedisString::string_as_slice(key).to_vec(),
        )
    };
    let all: Vec<Vec<Vec<u8>>> = with(|m| {
        m.of_key(db, &name)
            .map(|(holder, r)| {
                let at = Address::new(db, name.as_slice(), holder);
                words(&at, &r.id, Some(r))
            })
            .collect()
    });
    for w in all {
        with_strings(null_mut(), &w, |argv| {
            // SAFETY: live IO handle; "v" reads exactly argv[..len].
            unsafe {
                rm!(RedisModule_EmitAOF)(
                    aof,
                    NAME.as_ptr(),
                    c"v".as_ptr(),
                    argv.as_mut_ptr(),
                    argv.len(),
                );
            }
        });
    }
}

/// Redis 8.x atomic slot migration sends each key as `RESTORE` of its
/// value, never the `aux` data, so the source sends the moving slots' ids
/// ahead of the snapshot (its propagate event): the destination then
/// answers a resend of a request the source applied. Ids of freed keys go
/// too; a resent final release must still answer 0 there.
pub fn propagate_for_slots(ctx: *mut raw::RedisModuleCtx, slots: &[(u16, u16)]) {
    let all: Vec<Vec<Vec<u8>>> = with(|m| {
        m.all()
            .filter(|(at, _)| crate::core::cluster::in_ranges(slots, at.key()))
            .map(|(at, r)| words(at, &r.id, Some(r)))
            .collect()
    });
    // SAFETY: reading the API table, written once at load.
    let Some(propagate) = (unsafe { raw::RedisModule_ClusterPropagateForSlotMigration }) else {
        return;
    };
    for w in all {
        with_strings(ctx, &w, |argv| {
            // SAFETY: the migration's propagate event with its context; "v"
            // reads exactly argv[..len].
            unsafe {
                propagate(
                    ctx,
                    NAME.as_ptr(),
                    c"v".as_ptr(),
                    argv.as_mut_ptr(),
                    argv.len(),
                );
            }
        });
    }
}

// ---- the RDB: every remembered id, after the keys ------------------------

fn save_answer(rdb: *mut raw::RedisModuleIO, a: &Answer) {
    match a {
        Answer::Int(v) => {
            raw::save_unsigned(rdb, 0);
            raw::save_signed(rdb, *v);
        }
        Answer::Ints(vs) => {
            raw::save_unsigned(rdb, 1 + vs.len() as u64);
            for v in vs {
                raw::save_signed(rdb, *v);
            }
        }
    }
}

/// What `aux_load` takes back. `aux_save` writes nothing else, so an RDB
/// (or an AOF's RDB preamble) padlock wrote always loads: one record it
/// could not read back would stop the whole server from starting.
fn loads(holder: &[u8], id: &[u8]) -> bool {
    ids::valid_id(id) && crate::core::stored::holder(holder).is_ok()
}

pub fn aux_save(rdb: *mut raw::RedisModuleIO) {
    with(|m| {
        let saved = || m.all().filter(|(at, r)| loads(at.holder(), &r.id));
        raw::save_unsigned(rdb, saved().count() as u64);
        for (at, r) in saved() {
            raw::save_signed(rdb, i64::from(at.db));
            raw::save_slice(rdb, at.key());
            raw::save_slice(rdb, at.holder());
            raw::save_slice(rdb, &r.id);
            raw::save_signed(rdb, r.at_ms);
            raw::save_unsigned(rdb, r.print);
            save_answer(rdb, &r.answer);
        }
    });
}

const SHORT: &str = "data ends early or cannot be read";

/// Loads what `aux_save` wrote; the memory is replaced only when all of it
/// reads right.
pub fn aux_load(rdb: *mut raw::RedisModuleIO) -> Result<(), &'static str> {
    let u = || raw::load_unsigned(rdb).map_err(|_| SHORT);
    let i = || raw::load_signed(rdb).map_err(|_| SHORT);
    let b = || {
        raw::load_string_buffer(rdb)
            .map(|s| s.as_ref().to_vec())
            .map_err(|_| SHORT)
    };
    let n = u()?;
    let mut loaded = crate::core::ids::Memory::default();
    let bounds = bounds();
    for _ in 0..n {
        let db = i32::try_from(i()?).map_err(|_| "database number out of range")?;
        let (key, holder, id) = (b()?, b()?, b()?);
        let (at_ms, print) = (i()?, u()?);
        let answer = match u()? {
            0 => Answer::Int(i()?),
            k if k - 1 <= crate::core::args::MAX_KEYS as u64 => {
                Answer::Ints((1..k).map(|_| i()).collect::<Result<_, _>>()?)
            }
            _ => return Err("reply too long"),
        };
        if !loads(&holder, &id) {
            return Err("request-id or holder of a wrong length");
        }
        let at = Address::new(db, &key, &holder);
        let r = Remembered {
            id: id[..].into(),
            print,
            answer,
            at_ms,
        };
        loaded.remember(at, r, bounds);
    }
    with(|m| *m = loaded);
    // Its groups come due on the prune timer, as remembered ones do.
    super::memory::rearm(crate::glue::server::now_ms());
    Ok(())
}

/// For `aux_load`'s `when`.
pub const AFTER: c_int = raw::Aux::After as c_int;
