//! `LOCK.ACQUIRE`, `LOCK.MACQUIRE` and `LOCK.MRELEASE` arguments (the
//! commands every family shares are `crate::args`).

use crate::args::*;
use crate::error::Error;

/// `LOCK.ACQUIRE key holder ttl-ms [BLOCK timeout-ms [MAILBOX
/// mailbox-key]] [KEEP]`
#[derive(Debug)]
pub struct LockAcquire<'a, A> {
    pub key: &'a A,
    pub holder: &'a [u8],
    pub ttl_ms: i64,
    pub block_ms: Option<i64>,
    pub keep: bool,
    pub mailbox: Option<&'a A>,
}

/// `LOCK.MACQUIRE numkeys key [key ...] holder ttl-ms [BLOCK timeout-ms]`
/// and, without ttl and options, `LOCK.MRELEASE`.
#[derive(Debug)]
pub struct MultiKey<'a, A> {
    pub keys: &'a [A],
    pub holder: &'a [u8],
    pub ttl_ms: i64,
    pub block_ms: Option<i64>,
    pub keep: bool,
    pub mailbox: Option<&'a A>,
}

pub fn lock_acquire<'a, A: Arg>(
    args: &'a [A],
    limits: &Limits,
) -> Result<LockAcquire<'a, A>, Error> {
    if args.len() < 3 {
        return Err(Error::Arity);
    }
    let holder = holder(&args[1], limits)?;
    let ttl_ms = ttl(&args[2], limits)?;
    let (opts, keep) = options(&args[3..], &["BLOCK", "MAILBOX"], true)?;
    let block_ms = block(&opts, limits)?;
    Ok(LockAcquire {
        key: &args[0],
        holder,
        ttl_ms,
        mailbox: mailbox(&opts, block_ms.is_some(), MAILBOX_NEEDS_BLOCK)?,
        block_ms,
        keep,
    })
}

fn numkeys<A: Arg>(args: &[A], after: usize) -> Result<(&[A], &[A]), Error> {
    let first = args.first().ok_or(Error::Arity)?;
    let n = ranged(first, "numkeys", 1, MAX_KEYS)? as usize;
    if args.len() < 1 + n + after {
        return Err(Error::Arity);
    }
    let keys = &args[1..1 + n];
    let mut seen = std::collections::HashSet::with_capacity(n);
    if let Some(dup) = keys.iter().find(|k| !seen.insert(k.bytes())) {
        return Err(Error::DuplicateKey(dup.bytes().to_vec()));
    }
    Ok((keys, &args[1 + n..]))
}

pub fn lock_macquire<'a, A: Arg>(args: &'a [A], limits: &Limits) -> Result<MultiKey<'a, A>, Error> {
    let (keys, rest) = numkeys(args, 2)?;
    let holder = holder(&rest[0], limits)?;
    let ttl_ms = ttl(&rest[1], limits)?;
    let (opts, keep) = options(&rest[2..], &["BLOCK", "MAILBOX"], true)?;
    let block_ms = block(&opts, limits)?;
    Ok(MultiKey {
        keys,
        holder,
        ttl_ms,
        mailbox: mailbox(&opts, block_ms.is_some(), MAILBOX_NEEDS_BLOCK)?,
        block_ms,
        keep,
    })
}

pub fn lock_mrelease<'a, A: Arg>(args: &'a [A], limits: &Limits) -> Result<MultiKey<'a, A>, Error> {
    let (keys, rest) = numkeys(args, 1)?;
    if rest.len() != 1 {
        return Err(Error::Arity);
    }
    Ok(MultiKey {
        keys,
        holder: holder(&rest[0], limits)?,
        ttl_ms: 0,
        block_ms: None,
        keep: false,
        mailbox: None,
    })
}
