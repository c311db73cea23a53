//! `SEM.*` arguments.

use crate::args::*;
use crate::error::Error;

/// `SEM.ACQUIRE key holder limit ttl-ms [PERMITS n] [BLOCK timeout-ms]`
#[derive(Debug)]
pub struct SemAcquire<'a, A> {
    pub key: &'a A,
    pub holder: &'a [u8],
    pub limit: u64,
    pub ttl_ms: i64,
    pub permits: u64,
    pub block_ms: Option<i64>,
    pub keep: bool,
    pub mailbox: Option<&'a A>,
}

/// `SEM.RELEASE key holder [PERMITS n]` (`permits` None = all) and
/// `SEM.EXTEND key holder ttl-ms [PERMITS n]` (`ttl_ms` set).
#[derive(Debug)]
pub struct SemHolder<'a, A> {
    pub key: &'a A,
    pub holder: &'a [u8],
    pub ttl_ms: i64,
    pub permits: Option<u64>,
    pub keep: bool,
    /// `KEEP MAILBOX mailbox-key` (`SEM.EXTEND` only).
    pub mailbox: Option<&'a A>,
}

pub fn sem_acquire<'a, A: Arg>(args: &'a [A], limits: &Limits) -> Result<SemAcquire<'a, A>, Error> {
    if args.len() < 4 {
        return Err(Error::Arity);
    }
    let holder = holder(&args[1], limits)?;
    let limit = ranged(&args[2], "limit", 1, MAX_PERMITS)?;
    let ttl_ms = ttl(&args[3], limits)?;
    let (opts, keep) = options(&args[4..], &["PERMITS", "BLOCK", "MAILBOX"], true)?;
    let permits = match option(&opts, "PERMITS") {
        None => 1,
        Some(v) => match parse_int(v.bytes()) {
            Some(n) if n > limit && n <= MAX_PERMITS => return Err(Error::PermitsOverLimit),
            _ => ranged(v, "PERMITS", 1, limit)?,
        },
    };
    let block_ms = block(&opts, limits)?;
    Ok(SemAcquire {
        key: &args[0],
        holder,
        limit: limit as u64,
        ttl_ms,
        permits: permits as u64,
        block_ms,
        keep,
        mailbox: mailbox(&opts, block_ms.is_some(), MAILBOX_NEEDS_BLOCK)?,
    })
}

/// What follows a semaphore release or extend's positional arguments.
type HolderOptions<'a, A> = (Option<u64>, bool, Option<&'a A>);

/// `[PERMITS n]`, and `[KEEP [MAILBOX mailbox-key]]` where `keep` allows
/// it.
fn permits_option<A: Arg>(rest: &[A], keep: bool) -> Result<HolderOptions<'_, A>, Error> {
    let allowed: &[&'static str] = if keep {
        &["PERMITS", "MAILBOX"]
    } else {
        &["PERMITS"]
    };
    let (opts, kept) = options(rest, allowed, keep)?;
    let permits = option(&opts, "PERMITS")
        .map(|v| ranged(v, "PERMITS", 1, MAX_PERMITS))
        .transpose()?
        .map(|n| n as u64);
    Ok((permits, kept, mailbox(&opts, kept, MAILBOX_NEEDS_KEEP)?))
}

pub fn sem_release<'a, A: Arg>(args: &'a [A], limits: &Limits) -> Result<SemHolder<'a, A>, Error> {
    if args.len() < 2 {
        return Err(Error::Arity);
    }
    let holder = holder(&args[1], limits)?;
    let (permits, _, _) = permits_option(&args[2..], false)?;
    Ok(SemHolder {
        key: &args[0],
        holder,
        ttl_ms: 0,
        permits,
        keep: false,
        mailbox: None,
    })
}

pub fn sem_extend<'a, A: Arg>(args: &'a [A], limits: &Limits) -> Result<SemHolder<'a, A>, Error> {
    if args.len() < 3 {
        return Err(Error::Arity);
    }
    let holder = holder(&args[1], limits)?;
    let ttl_ms = ttl(&args[2], limits)?;
    let (permits, keep, mailbox) = permits_option(&args[3..], true)?;
    Ok(SemHolder {
        key: &args[0],
        holder,
        ttl_ms,
        permits,
        keep,
        mailbox,
    })
}
