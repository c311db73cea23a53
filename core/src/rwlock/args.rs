//! `RWLOCK.*` arguments.

use crate::args::*;
use crate::error::Error;
use crate::rwlock::Mode;

/// `RWLOCK.ACQUIRE key holder READ|WRITE ttl-ms [BLOCK timeout-ms]` and,
/// without ttl and options, `RWLOCK.RELEASE key holder READ|WRITE`.
#[derive(Debug)]
pub struct RwHold<'a, A> {
    pub key: &'a A,
    pub holder: &'a [u8],
    pub mode: Mode,
    pub ttl_ms: i64,
    pub block_ms: Option<i64>,
    pub keep: bool,
    pub mailbox: Option<&'a A>,
}

fn mode(arg: &impl Arg) -> Result<Mode, Error> {
    let m = arg.bytes();
    if m.eq_ignore_ascii_case(b"READ") {
        Ok(Mode::Read)
    } else if m.eq_ignore_ascii_case(b"WRITE") {
        Ok(Mode::Write)
    } else {
        Err(Error::Mode)
    }
}

pub fn rw_acquire<'a, A: Arg>(args: &'a [A], limits: &Limits) -> Result<RwHold<'a, A>, Error> {
    if args.len() < 4 {
        return Err(Error::Arity);
    }
    let holder = holder(&args[1], limits)?;
    let mode = mode(&args[2])?;
    let ttl_ms = ttl(&args[3], limits)?;
    let (opts, keep) = options(&args[4..], &["BLOCK", "MAILBOX"], true)?;
    let block_ms = block(&opts, limits)?;
    Ok(RwHold {
        key: &args[0],
        holder,
        mode,
        ttl_ms,
        mailbox: mailbox(&opts, block_ms.is_some(), MAILBOX_NEEDS_BLOCK)?,
        block_ms,
        keep,
    })
}

pub fn rw_release<'a, A: Arg>(args: &'a [A], limits: &Limits) -> Result<RwHold<'a, A>, Error> {
    if args.len() != 3 {
        return Err(Error::Arity);
    }
    Ok(RwHold {
        key: &args[0],
        holder: holder(&args[1], limits)?,
        mode: mode(&args[2])?,
        ttl_ms: 0,
        block_ms: None,
        keep: false,
        mailbox: None,
    })
}
