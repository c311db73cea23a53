//! Argument vectors to typed requests. Every range and syntax rule of the
//! errors table of docs/commands.md is checked here, before any key is touched, so a
//! refused command never leaves partial state.

use super::error::Error;

/// Largest semaphore limit and permit count (see `bounds`).
pub const MAX_PERMITS: i64 = super::bounds::MAX_PERMITS as i64;
/// Most keys one `LOCK.MACQUIRE` / `LOCK.MRELEASE` may name.
pub const MAX_KEYS: i64 = 1024;

/// Something that reads as the bytes of one command argument. The glue
/// implements it for Redis strings, tests use plain byte slices.
pub trait Arg {
    fn bytes(&self) -> &[u8];
}

/// Anything that derefs to bytes: `&[u8]`, `Vec<u8>`, and the glue's
/// Redis strings.
impl<T: std::ops::Deref<Target = [u8]>> Arg for T {
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// The bounds in force (from the module configuration).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_ttl_ms: i64,
    pub max_holder_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_ttl_ms: super::settings::MAX_TTL_MS.default,
            max_holder_len: super::settings::MAX_HOLDER_LEN_SETTING.default as usize,
        }
    }
}

/// `LOCK.REENTER` / `LOCK.EXTEND` / `RWLOCK.EXTEND key holder ttl-ms
/// [KEEP]` and `LOCK.WAITFOR key holder ttl-ms`.
#[derive(Debug)]
pub struct KeyHolderTtl<'a, A> {
    pub key: &'a A,
    pub holder: &'a [u8],
    pub ttl_ms: i64,
    pub keep: bool,
    /// `KEEP MAILBOX mailbox-key` (the extends only).
    pub mailbox: Option<&'a A>,
}

/// `LOCK.RELEASE key holder`
#[derive(Debug)]
pub struct KeyHolder<'a, A> {
    pub key: &'a A,
    pub holder: &'a [u8],
}

pub use super::number::parse_int;

pub(crate) fn ranged(arg: &impl Arg, name: &'static str, min: i64, max: i64) -> Result<i64, Error> {
    match parse_int(arg.bytes()) {
        Some(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(Error::Range { name, min, max }),
    }
}

/// A holder within the bound in force, the one length check of every command.
pub fn holder<'a>(arg: &'a impl Arg, limits: &Limits) -> Result<&'a [u8], Error> {
    let h = arg.bytes();
    if h.is_empty() || h.len() > limits.max_holder_len {
        return Err(Error::HolderLength {
            max: limits.max_holder_len,
        });
    }
    Ok(h)
}

pub(crate) fn ttl(arg: &impl Arg, limits: &Limits) -> Result<i64, Error> {
    ranged(arg, "ttl-ms", 1, limits.max_ttl_ms)
}

/// The most `NAME value` options a command takes.
const MAX_OPTIONS: usize = 3;

/// Options found: each allowed name's value, in the allowed name's place
/// (on the stack: nearly every blocking request has one).
pub(crate) struct Found<'a, A> {
    slots: [Option<(&'static str, &'a A)>; MAX_OPTIONS],
}

/// Trailing options in any order: `NAME value` ones, where the last of a
/// repeated option wins as in Redis' own commands (`allowed` names those
/// this command takes), and, where `keep` says so, the `KEEP` flag, which
/// may appear once.
pub(crate) fn options<'a, A: Arg>(
    rest: &'a [A],
    allowed: &[&'static str],
    keep: bool,
) -> Result<(Found<'a, A>, bool), Error> {
    let mut found = Found {
        slots: [None; MAX_OPTIONS],
    };
    let mut kept = false;
    let mut i = 0;
    while i < rest.len() {
        if keep && rest[i].bytes().eq_ignore_ascii_case(b"KEEP") {
            if kept {
                return Err(Error::Invalid("KEEP given twice"));
            }
            kept = true;
            i += 1;
            continue;
        }
        let word = rest[i].bytes();
        // (`let ... else`, not `ok_or(..)?`: that builds and drops an error
        // for every option that is fine.)
        let Some(place) = allowed
            .iter()
            .position(|n| word.eq_ignore_ascii_case(n.as_bytes()))
        else {
            return Err(Error::Syntax);
        };
        let Some(value) = rest.get(i + 1) else {
            return Err(Error::Syntax);
        };
        // `allowed` is a command's own fixed list of at most MAX_OPTIONS.
        let Some(slot) = found.slots.get_mut(place) else {
            return Err(Error::Syntax);
        };
        *slot = Some((allowed[place], value));
        i += 2;
    }
    Ok((found, kept))
}

pub(crate) fn option<'a, A>(opts: &Found<'a, A>, name: &str) -> Option<&'a A> {
    opts.slots
        .iter()
        .flatten()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
}

pub(crate) fn block<A: Arg>(opts: &Found<'_, A>, limits: &Limits) -> Result<Option<i64>, Error> {
    option(opts, "BLOCK")
        .map(|v| ranged(v, "timeout-ms", 0, limits.max_ttl_ms))
        .transpose()
}

/// `MAILBOX mailbox-key`, which only goes with the option that gives it a
/// meaning (`BLOCK` on an acquire, `KEEP` on an extend): alone it would
/// be silently ignored, so it is refused.
pub(crate) fn mailbox<'a, A>(
    opts: &Found<'a, A>,
    with: bool,
    needs: &'static str,
) -> Result<Option<&'a A>, Error> {
    match option(opts, "MAILBOX") {
        Some(_) if !with => Err(Error::Invalid(needs)),
        m => Ok(m),
    }
}

pub(crate) const MAILBOX_NEEDS_BLOCK: &str = "MAILBOX needs BLOCK timeout-ms";
pub(crate) const MAILBOX_NEEDS_KEEP: &str = "MAILBOX needs KEEP";

/// `key holder ttl-ms` (`LOCK.WAITFOR`).
pub fn key_holder_ttl<'a, A: Arg>(
    args: &'a [A],
    limits: &Limits,
) -> Result<KeyHolderTtl<'a, A>, Error> {
    if args.len() != 3 {
        return Err(Error::Arity);
    }
    key_holder_ttl_keep(args, limits)
}

/// `key holder ttl-ms [KEEP [MAILBOX mailbox-key]]` (`LOCK.EXTEND`,
/// `RWLOCK.EXTEND`).
pub fn key_holder_ttl_extend<'a, A: Arg>(
    args: &'a [A],
    limits: &Limits,
) -> Result<KeyHolderTtl<'a, A>, Error> {
    if args.len() < 3 {
        return Err(Error::Arity);
    }
    let holder = holder(&args[1], limits)?;
    let ttl_ms = ttl(&args[2], limits)?;
    let (opts, keep) = options(&args[3..], &["MAILBOX"], true)?;
    Ok(KeyHolderTtl {
        key: &args[0],
        holder,
        ttl_ms,
        keep,
        mailbox: mailbox(&opts, keep, MAILBOX_NEEDS_KEEP)?,
    })
}

/// `key holder ttl-ms [KEEP]` (`LOCK.REENTER`).
pub fn key_holder_ttl_keep<'a, A: Arg>(
    args: &'a [A],
    limits: &Limits,
) -> Result<KeyHolderTtl<'a, A>, Error> {
    if args.len() < 3 {
        return Err(Error::Arity);
    }
    let holder = holder(&args[1], limits)?;
    let ttl_ms = ttl(&args[2], limits)?;
    let (_, keep) = options(&args[3..], &[], true)?;
    Ok(KeyHolderTtl {
        key: &args[0],
        holder,
        ttl_ms,
        keep,
        mailbox: None,
    })
}

pub fn key_holder<'a, A: Arg>(args: &'a [A], limits: &Limits) -> Result<KeyHolder<'a, A>, Error> {
    if args.len() != 2 {
        return Err(Error::Arity);
    }
    Ok(KeyHolder {
        key: &args[0],
        holder: holder(&args[1], limits)?,
    })
}

pub fn key_only<A: Arg>(args: &[A]) -> Result<&A, Error> {
    match args {
        [key] => Ok(key),
        _ => Err(Error::Arity),
    }
}

/// `LOCK.CANCEL key holder request-id`
#[derive(Debug)]
pub struct Cancel<'a, A> {
    pub key: &'a A,
    pub holder: &'a [u8],
    pub request_id: &'a [u8],
}

pub fn lock_cancel<'a, A: Arg>(args: &'a [A], limits: &Limits) -> Result<Cancel<'a, A>, Error> {
    let [key, h, id] = args else {
        return Err(Error::Arity);
    };
    if !super::ids::valid_id(id.bytes()) {
        return Err(Error::RequestIdLength {
            max: super::ids::MAX_ID_LEN,
        });
    }
    Ok(Cancel {
        key,
        holder: holder(h, limits)?,
        request_id: id.bytes(),
    })
}

/// Edges `LOCK.GRAPH` shows without `COUNT`.
pub const GRAPH_COUNT: usize = 10_000;

/// Keys `LOCK.TOP` shows without `COUNT`.
pub const TOP_COUNT: usize = 10;

/// `LOCK.GRAPH [COUNT n]`: the most edges to show.
pub fn graph<A: Arg>(args: &[A]) -> Result<usize, Error> {
    count(args, GRAPH_COUNT)
}

/// `LOCK.TOP [COUNT n]`: the most keys to show.
pub fn top<A: Arg>(args: &[A]) -> Result<usize, Error> {
    count(args, TOP_COUNT)
}

/// `[COUNT n]`, `default` without it.
fn count<A: Arg>(args: &[A], default: usize) -> Result<usize, Error> {
    match args {
        [] => Ok(default),
        [name, n] if name.bytes().eq_ignore_ascii_case(b"COUNT") => {
            Ok(ranged(n, "COUNT", 1, i32::MAX as i64)? as usize)
        }
        [_] | [_, _] => Err(Error::Syntax),
        _ => Err(Error::Arity),
    }
}

#[cfg(test)]
mod tests;
