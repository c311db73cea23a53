//! Every error reply padlock can give, worded in one place so that the texts
//! docs/commands.md promises (`NOTHELD`, `DEADLOCK`, ranges, syntax) cannot drift
//! between commands.

use std::fmt::Write;

/// A refused request. The glue turns it into an error reply verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Wrong number of arguments; the glue answers with Redis' own wording.
    Arity,
    /// Unknown option, or an option without its value.
    Syntax,
    /// A numeric argument that is not an integer or out of its range.
    Range {
        name: &'static str,
        min: i64,
        max: i64,
    },
    /// Holder empty or longer than `max-holder-len`.
    HolderLength { max: usize },
    /// The same key twice in one multi-key call.
    DuplicateKey(Vec<u8>),
    /// `PERMITS n` larger than the semaphore limit in the same request.
    PermitsOverLimit,
    /// An state command naming a state the rules never reach.
    Invalid(&'static str),
    /// An state command sent by a client (they come only from the master
    /// link and the AOF).
    EffectOnly(Vec<u8>),
    /// `eviction refuse` while `maxmemory-policy` (named) can evict.
    EvictionRefused(String),
    /// A read-write lock mode other than `READ` or `WRITE`.
    Mode,
    /// A counter (fence counter, reentry count, hold count) is at its
    /// bound: the grant that would pass it is refused.
    Bound { name: &'static str, max: u64 },
    /// The key holds a value of another type.
    WrongType,
    /// Keys of one request in different cluster slots.
    CrossSlot,
    /// The holder does not hold the key (or not enough permits of it).
    NotHeld { key: Vec<u8>, holder: Vec<u8> },
    /// Waiting would close a cycle in the wait-for graph; holds the cycle,
    /// alternating holder, key, holder, ... and back to the first holder.
    Deadlock(Vec<Vec<u8>>),
    /// The restart grace is still running.
    TryAgain,
    /// A mailbox wait on a key whose slot this node is moving away: the
    /// outcome could not reach the mailbox, which moves with it.
    SlotMoving,
    /// Declared wait edges at `max-wait-edges`.
    TooManyEdges { limit: i64 },
    /// A `KEEP` ttl too short to keep (below 3 × `keep-min-interval-ms`).
    KeepTooShort { min: i64 },
    /// Too many clients wait: on this key (`Some(key)`), or on the server.
    TooManyWaiters { key: Option<Vec<u8>>, limit: i64 },
    /// A request-id empty or longer than `max` bytes.
    RequestIdLength { max: usize },
    /// A request-id that applied with other arguments.
    RequestIdReused(Vec<u8>),
}

impl Error {
    /// `NOTHELD`: `holder` does not hold `key` (or not enough of it).
    pub fn not_held(key: &[u8], holder: &[u8]) -> Error {
        Error::NotHeld {
            key: key.to_vec(),
            holder: holder.to_vec(),
        }
    }

    /// The error line, without the leading `-`.
    pub fn message(&self) -> String {
        match self {
            Error::Arity => "ERR wrong number of arguments".to_string(),
            Error::Syntax => "ERR syntax error".to_string(),
            Error::Range { name, min, max } => {
                format!("ERR {name} must be an integer from {min} to {max}")
            }
            Error::HolderLength { max } => {
                format!("ERR holder must be 1 to {max} bytes long")
            }
            Error::DuplicateKey(key) => {
                format!("ERR duplicate key '{}' in one call", escape(key))
            }
            Error::PermitsOverLimit => "ERR PERMITS must not exceed limit".to_string(),
            Error::Invalid(why) => format!("ERR {why}"),
            Error::EffectOnly(cmd) => format!(
                "ERR {} is applied from the replication stream and the AOF only",
                escape(cmd).to_ascii_uppercase()
            ),
            Error::EvictionRefused(policy) => format!(
                "ERR maxmemory-policy {} can evict held locks (padlock.eviction is refuse)",
                escape(policy.as_bytes())
            ),
            Error::Mode => "ERR mode must be READ or WRITE".to_string(),
            Error::Bound { name, max } => format!("ERR {name} is at its bound ({max})"),
            Error::WrongType => {
                "WRONGTYPE Operation against a key holding the wrong kind of value".to_string()
            }
            Error::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".to_string(),
            Error::NotHeld { key, holder } => format!(
                "NOTHELD '{}' is not held by '{}'",
                escape(key),
                escape(holder)
            ),
            Error::Deadlock(cycle) => {
                let mut out = String::from("DEADLOCK");
                for (i, node) in cycle.iter().enumerate() {
                    out.push_str(if i == 0 { " " } else { " -> " });
                    out.push_str(&escape(node));
                }
                out
            }
            Error::TooManyWaiters { key: Some(k), limit } => format!(
                "ERR too many waiters: {limit} clients already wait for '{}' (padlock.max-waiters-per-key)",
                escape(k)
            ),
            Error::TooManyWaiters { key: None, limit } => format!(
                "ERR too many waiters: {limit} clients already wait on this server (padlock.max-waiters)"
            ),
            Error::TooManyEdges { limit } => format!(
                "ERR too many wait edges: {limit} already declared (padlock.max-wait-edges)"
            ),
            Error::KeepTooShort { min } => format!(
                "ERR ttl-ms with KEEP must be at least {min} (3 x padlock.keep-min-interval-ms)"
            ),
            Error::RequestIdLength { max } => {
                format!("ERR request-id must be 1 to {max} bytes long")
            }
            Error::RequestIdReused(id) => format!(
                "ERR request-id '{}' was used for another request",
                escape(id)
            ),
            Error::SlotMoving => SLOT_MOVING.to_string(),
            Error::TryAgain => {
                "TRYAGAIN restart grace is running, a holder from before the restart or failover may still be working"
                    .to_string()
            }
        }
    }
}

/// Renders bytes for an error line: printable ASCII as is, everything else
/// (CR, LF, NUL, UTF-8 sequences) as `\xHH`, so no client bytes can break the
/// RESP framing of an error reply. (As docs/commands.md words it, a `\` is printable
/// and stays as it is.)
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if (0x20..0x7f).contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// What a mailbox request is told while its key's slot moves to another
/// node, and what is posted (after `-`) to the waits queued there already.
pub const SLOT_MOVING: &str =
    "TRYAGAIN the key's slot is moving to another node, wait again once it moved";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_keeps_printable_and_hexes_the_rest() {
        assert_eq!(escape(b"acct:1"), "acct:1");
        assert_eq!(escape(b"a\r\nb\0"), "a\\x0d\\x0ab\\x00");
        assert_eq!(escape("é".as_bytes()), "\\xc3\\xa9");
        assert_eq!(escape(b"back\\slash"), "back\\slash");
    }

    #[test]
    fn deadlock_names_the_cycle() {
        let cycle = [&b"t1"[..], b"acct:1", b"t2", b"acct:2", b"t1"]
            .iter()
            .map(|s| s.to_vec())
            .collect();
        assert_eq!(
            Error::Deadlock(cycle).message(),
            "DEADLOCK t1 -> acct:1 -> t2 -> acct:2 -> t1"
        );
    }

    #[test]
    fn messages_never_contain_line_breaks() {
        let e = Error::NotHeld {
            key: b"k\r\n".to_vec(),
            holder: b"\n".to_vec(),
        };
        assert!(!e.message().contains('\n') && !e.message().contains('\r'));
        assert!(e.message().starts_with("NOTHELD "));
    }
}
