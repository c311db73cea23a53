//! `PADLOCK.REQUESTID`: a remembered request-id sent to replicas and the
//! AOF on its own, when it cannot ride on its request's effect (`piggy`):
//! multi-key requests, a wait granted later, a grant taken back. The RDB
//! and AOF-rewrite forms are `rdb`'s.
//!
//! `PADLOCK.REQUESTID key holder id at-ms print I n` (an integer reply),
//! `... A n1 n2 ...` (an array), or `PADLOCK.REQUESTID key holder id
//! FORGET` (a grant taken back).

use redis_module::{Context, RedisString, RedisValue};

use super::{with, Tag};
use crate::core::args::{parse_int, Arg};
use crate::core::bounds::MAX_HOLDER_LEN;
use crate::core::error::Error;
use crate::core::ids::{self, Address, Answer, Remembered};
use crate::glue::blocking;
use crate::glue::server::from_replication;

pub use super::rdb::NAME;
use super::rdb::{with_strings, words};

fn send(ctx: &Context, w: &[Vec<u8>]) {
    with_strings(ctx.ctx, w, |argv| {
        // SAFETY: live context; the "v" format reads exactly argv[..len].
        unsafe {
            rm!(RedisModule_Replicate)(
                ctx.ctx,
                NAME.as_ptr(),
                c"v".as_ptr(),
                argv.as_mut_ptr(),
                argv.len(),
            );
        }
    });
}

pub fn replicate(ctx: &Context, at: &Address, r: &Remembered) {
    match r.answer {
        Answer::Int(v) => crate::glue::replicate::request_id(
            ctx,
            [at.key(), at.holder(), &r.id],
            r.at_ms,
            r.print,
            v,
        ),
        Answer::Ints(_) => send(ctx, &words(at, &r.id, Some(r))),
    }
}

pub fn replicate_forget(ctx: &Context, tag: &Tag) {
    send(ctx, &words(&tag.at, &tag.id, None));
}

/// The state command's body.
pub fn command(ctx: &Context, args: &[RedisString]) -> Result<RedisValue, Error> {
    from_replication(ctx, args)?;
    let [_, key, holder, id, rest @ ..] = args else {
        return Err(Error::Arity);
    };
    let at = Address::new(blocking::selected_db(ctx), key.bytes(), holder.bytes());
    if !ids::valid_id(id.bytes()) {
        return Err(Error::RequestIdLength {
            max: crate::core::ids::MAX_ID_LEN,
        });
    }
    // The bound the RDB loads by (`rdb::loads`): what is taken here saves.
    if crate::core::stored::holder(holder.bytes()).is_err() {
        return Err(Error::HolderLength {
            max: MAX_HOLDER_LEN,
        });
    }
    if let [word] = rest {
        if word.bytes().eq_ignore_ascii_case(b"FORGET") {
            with(|m| m.forget_id(&at, id.bytes()));
            return Ok(RedisValue::SimpleStringStatic("OK"));
        }
    }
    let [at_ms, print, kind, values @ ..] = rest else {
        return Err(Error::Arity);
    };
    let int = |a: &RedisString, name: &'static str| {
        parse_int(a.bytes()).ok_or(Error::Range {
            name,
            min: i64::MIN,
            max: i64::MAX,
        })
    };
    let nums = values
        .iter()
        .map(|v| int(v, "reply"))
        .collect::<Result<Vec<_>, _>>()?;
    let answer = match (kind.bytes(), nums.as_slice()) {
        (b"I", [v]) => Answer::Int(*v),
        (b"A", vs) if vs.len() <= crate::core::args::MAX_KEYS as usize => Answer::Ints(vs.into()),
        _ => return Err(Error::Syntax),
    };
    let r = Remembered {
        id: id.bytes().into(),
        print: int(print, "print")? as u64,
        answer,
        at_ms: int(at_ms, "at-ms")?,
    };
    super::store(ctx, at, r, crate::glue::server::now_ms());
    Ok(RedisValue::SimpleStringStatic("OK"))
}
