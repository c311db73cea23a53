//! A request-id rides on the request's own effect: `PADLOCK.LOCKSET key
//! holder ... ID at-ms:print:rule request-id`, where the rule names which
//! of the effect's own fields the reply was (a fence, a count, permits, a
//! holder's read and write holds, or 1). The fewest allocations Redis
//! makes per request: `ID` is a string padlock keeps, the id the
//! command's own argument (Redis takes a reference), and the prefix short
//! enough to be one embedded string (the single word `at-ms:print:rule:id`
//! sent before was past 44 bytes, so two allocations and two frees). One propagated
//! command instead of two (and no MULTI around them): on a server with an
//! AOF and replicas the second effect and its transaction cost more than
//! the request itself. A request whose reply is not one of its effect's
//! fields (multi-key ones, a wait granted later) sends `PADLOCK.REQUESTID`
//! instead (`saved`).

use redis_module::{raw, Context, RedisString};

use super::rider;
pub use super::rule::{Fields, Rule};
use crate::core::args::{parse_int, Arg};
use crate::core::error::Error;
use crate::core::ids::Id;

/// Whether a request replicates as itself (`RM_ReplicateVerbatim`) rather
/// than as its effect with its id riding on it. A command qualifies when
/// running it again on a replica or from the AOF, on the same state, can
/// only end in the master's state and reply: it draws no fence and sets
/// no deadline of its own. The releases qualify: a lock's takes one count
/// off or frees the key, a semaphore's gives back permits, a read-write
/// lock's takes off one hold; each reads the key alone (from the master
/// link or the AOF Redis never sees a key as expired), a semaphore's or
/// read-write lock's other holders are judged by no clock there
/// (`runs_again`: the master sends the ones its clock dropped as effects
/// first), and the holder's deadline stays the one the master wrote. The
/// replica runs the request with its id, and so remembers the id as the
/// master did; a resend of it from the AOF answers from memory and changes
/// nothing. Sent this way a release costs the master a copy of its
/// arguments instead of an effect looked up by name and built word by
/// word (docs/design.md).
pub fn verbatim(command: &[u8]) -> bool {
    matches!(
        command,
        b"lock.release" | b"sem.release" | b"rwlock.release"
    )
}

/// What an effect read from its tail: the id, when, the print and the
/// rule.
pub struct Tail {
    pub id: Id,
    pub at_ms: i64,
    pub print: u64,
    pub rule: Rule,
}

/// The longest prefix: two 20-digit numbers, the longest rule and two
/// colons. At most 44 bytes, so Redis makes it one embedded string (one
/// allocation, where a longer word takes two).
const PREFIX_MAX: usize = 20 + 20 + 7 + 2;

/// A tail about to be sent: `ID at-ms:print:rule request-id`. The prefix
/// is made on the stack (an effect is sent on every request); the id goes
/// as its own word, so that it is the command's own argument, which Redis
/// passes on by reference, not a copy.
pub struct Packed {
    buf: [u8; PREFIX_MAX],
    len: usize,
    id: Id,
    arg: *mut raw::RedisModuleString,
}

impl Packed {
    fn new(at_ms: i64, print: u64, rule: Rule, id: &Id) -> Packed {
        let mut p = Packed {
            buf: [0; PREFIX_MAX],
            len: 0,
            id: id.clone(),
            arg: std::ptr::null_mut(),
        };
        let mut digits = itoa::Buffer::new();
        p.push(digits.format(at_ms).as_bytes());
        p.push(b":");
        p.push(digits.format(print).as_bytes());
        p.push(b":");
        p.push(rule.word().to_bytes());
        p
    }

    #[inline]
    fn push(&mut self, part: &[u8]) {
        if let Some(to) = self.buf.get_mut(self.len..self.len + part.len()) {
            to.copy_from_slice(part);
            self.len += part.len();
        }
    }

    /// `at-ms:print:rule`.
    pub fn prefix(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub fn id(&self) -> &[u8] {
        &self.id
    }

    /// The id as the running command's argument, if it is one (else null).
    pub fn arg(&self) -> *mut raw::RedisModuleString {
        self.arg
    }
}

/// What an effect about to be sent does with the running request's id.
pub enum Ride {
    /// Send the effect, with this tail when it is the request's own.
    Effect(Option<Packed>),
    /// The request replicated as itself: send nothing.
    Sent,
}

/// Called by the effect of `key` and `holder` as it is sent: the word to
/// append when it is the running request's own (once per request), or
/// `Sent` when that request replicated as itself instead.
#[inline]
pub fn ride(ctx: &Context, key: &[u8], holder: &[u8], fields: Fields) -> Ride {
    if !rider::boarded() {
        return Ride::Effect(None);
    }
    ride_boarded(ctx, key, holder, fields)
}

fn ride_boarded(ctx: &Context, key: &[u8], holder: &[u8], fields: Fields) -> Ride {
    let ride = rider::with(|rider| {
        let Some(rule) = rider.rule.filter(|_| rider.sent.is_none()) else {
            return Ride::Effect(None);
        };
        let tag = rider.tag();
        if tag.at.key() != key || tag.at.holder() != holder {
            return Ride::Effect(None);
        }
        let ride = if rider.verbatim {
            Ride::Sent
        } else {
            let mut tail = Packed::new(rider.at_ms, tag.print, rule, &tag.id);
            tail.arg = rider.arg;
            Ride::Effect(Some(tail))
        };
        rider.sent = Some(fields);
        ride
    })
    .unwrap_or(Ride::Effect(None));
    if let Ride::Sent = ride {
        // SAFETY: a command's context; Redis copies the argv it holds.
        unsafe { rm!(RedisModule_ReplicateVerbatim)(ctx.ctx) };
    }
    ride
}

/// Where a state command's tail starts, if it has one: `ID
/// at-ms:print:rule request-id`, or the single word `ID
/// at-ms:print:rule:request-id` that padlock sent before 2026-12-07 (an
/// AOF may still hold it). A kind's own words never read `ID` in either
/// place: the word before its last is a number, and a prefix holds colons.
pub fn tail_start(args: &[RedisString], own_min: usize) -> Option<usize> {
    let is_id = |at: usize| args[at].bytes().eq_ignore_ascii_case(b"ID");
    [2, 3]
        .into_iter()
        .filter_map(|words| args.len().checked_sub(words))
        .find(|&at| at >= own_min && is_id(at))
}

/// Reads a tail (`args` are its words, `ID` first).
pub fn parse(args: &[RedisString]) -> Result<Tail, Error> {
    let (id_t, prefix, id) = match args {
        [id_t, packed] => {
            // The id is last: it may hold colons.
            let p = packed.bytes();
            let cut = (0..3).try_fold(0, |from, _| {
                p[from..]
                    .iter()
                    .position(|&b| b == b':')
                    .map(|i| from + i + 1)
            });
            let Some(cut) = cut else {
                return Err(Error::Syntax);
            };
            (id_t, &p[..cut - 1], &p[cut..])
        }
        [id_t, prefix, id] => (id_t, prefix.bytes(), id.bytes()),
        _ => return Err(Error::Syntax),
    };
    if !id_t.bytes().eq_ignore_ascii_case(b"ID") {
        return Err(Error::Syntax);
    }
    let mut parts = prefix.splitn(3, |&b| b == b':');
    let (Some(at), Some(print), Some(rule)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(Error::Syntax);
    };
    if !crate::core::ids::valid_id(id) {
        return Err(Error::RequestIdLength {
            max: crate::core::ids::MAX_ID_LEN,
        });
    }
    let at_ms = parse_int(at).ok_or(Error::Syntax)?;
    let print = std::str::from_utf8(print)
        .ok()
        .and_then(|p| p.parse::<u64>().ok())
        .ok_or(Error::Syntax)?;
    let rule = Rule::parse(rule).ok_or(Error::Syntax)?;
    Ok(Tail {
        id: id.into(),
        at_ms,
        print,
        rule,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_as_the_decimal_words_it_always_was() {
        let long = [b'x'; crate::core::ids::MAX_ID_LEN];
        for at in [0, 9, 10, 1_764_620_000_123, -5, i64::MIN, i64::MAX] {
            for print in [0, 1, 99, 100, u64::MAX] {
                for rule in [Rule::Fence, Rule::Holds, Rule::Permits] {
                    for id in [&b"r:1"[..], b"a:b:c", &long] {
                        let want =
                            [format!("{at}:{print}:").as_bytes(), rule.word().to_bytes()].concat();
                        let p = Packed::new(at, print, rule, &Id::from(id));
                        assert_eq!(p.prefix(), &want[..]);
                        assert_eq!(p.id(), id);
                    }
                }
            }
        }
        // What a usual request sends is one embedded string in Redis.
        let p = Packed::new(
            1_764_620_000_123,
            u64::MAX,
            Rule::Permits,
            &Id::from(&b"r"[..]),
        );
        assert!(p.prefix().len() <= 44);
    }
}
