//! A request-id rides on the request's own effect: `PADLOCK.LOCKSET key
//! holder ... at-ms:print:rule:request-id`, one word after the kind's own
//! (found by their number), where the rule names which of the effect's
//! own fields the reply was (a fence, a count, permits, a holder's read
//! and write holds, or 1). One word, because on a server with an AOF and
//! replicas each argument is written to both. One propagated
//! command instead of two (and no MULTI around them): on a server with an
//! AOF and replicas the second effect and its transaction cost more than
//! the request itself. A request whose reply is not one of its effect's
//! fields (multi-key ones, a wait granted later) sends `PADLOCK.REQUESTID`
//! instead (`saved`).

use redis_module::{Context, RedisString};

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

/// The longest packed word: two 20-digit numbers, the longest rule, three
/// colons and the longest id.
const PACKED_MAX: usize = 20 + 20 + 7 + 3 + crate::core::ids::MAX_ID_LEN;

/// A tail about to be sent: the one word `at-ms:print:rule:request-id`
/// (the id last: it may hold colons), made in the effect's own stack frame
/// (an effect is sent on every request). One word, not `ID` and a word or
/// more: on a server with an AOF and replicas each more argument cost
/// about a thousand instructions (written to both, length and all), where
/// a string made for it costs a fifth of that.
pub struct Packed {
    buf: [u8; PACKED_MAX],
    len: usize,
}

impl Packed {
    /// Written into a fresh `empty()` in the slot the effect keeps it in
    /// (`ride`): a word of a hundred-odd bytes, made for every request with
    /// an id, is never copied on its way to `RM_Replicate`.
    fn fill(&mut self, at_ms: i64, print: u64, rule: Rule, id: &[u8]) {
        let mut digits = itoa::Buffer::new();
        self.push(digits.format(at_ms).as_bytes());
        self.push(b":");
        self.push(digits.format(print).as_bytes());
        self.push(b":");
        self.push(rule.word().to_bytes());
        self.push(b":");
        // An id is at most MAX_ID_LEN (checked when it came in): fits.
        self.push(id);
    }

    fn empty() -> Packed {
        Packed {
            buf: [0; PACKED_MAX],
            len: 0,
        }
    }

    #[inline]
    fn push(&mut self, part: &[u8]) {
        if let Some(to) = self.buf.get_mut(self.len..self.len + part.len()) {
            to.copy_from_slice(part);
            self.len += part.len();
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// What an effect about to be sent does with the running request's id.
pub enum Ride {
    /// Send the effect, with the tail `ride` made when there is one.
    Effect,
    /// The request replicated as itself: send nothing.
    Sent,
}

/// Called by the effect of `key` and `holder` as it is sent: makes in
/// `word` the word to append when it is the running request's own (once
/// per request), or answers `Sent` when that request replicated as itself
/// instead.
#[inline]
pub fn ride(
    ctx: &Context,
    key: &[u8],
    holder: &[u8],
    fields: Fields,
    word: &mut Option<Packed>,
) -> Ride {
    if !rider::boarded() {
        return Ride::Effect;
    }
    ride_boarded(ctx, (key, holder), fields, word)
}

/// `ride` once a rider is aboard, apart from the check above: most
/// effects carry none.
fn ride_boarded(
    ctx: &Context,
    (key, holder): (&[u8], &[u8]),
    fields: Fields,
    word: &mut Option<Packed>,
) -> Ride {
    let ride = rider::with(|rider| {
        let Some(rule) = rider.rule.filter(|_| rider.sent.is_none()) else {
            return Ride::Effect;
        };
        let tag = rider.tag();
        if tag.at.key() != key || tag.at.holder() != holder {
            return Ride::Effect;
        }
        let ride = if rider.verbatim {
            Ride::Sent
        } else {
            word.insert(Packed::empty())
                .fill(rider.at_ms, tag.print, rule, &tag.id);
            Ride::Effect
        };
        rider.sent = Some(fields);
        ride
    })
    .unwrap_or(Ride::Effect);
    if let Ride::Sent = ride {
        // SAFETY: a command's context; Redis copies the argv it holds.
        unsafe { rm!(RedisModule_ReplicateVerbatim)(ctx.ctx) };
    }
    ride
}

/// Where a state command's tail starts (after the kind's own `words`),
/// if it has one: the word `at-ms:print:rule:request-id` padlock sends,
/// or what earlier builds sent and an AOF may still hold: `ID` and that
/// word (until 2026-12-07), or `ID at-ms:print:rule request-id` (builds
/// of 2026-12-07 only).
pub fn tail_start(args: &[RedisString], words: usize) -> Option<usize> {
    let marked = || {
        args.get(words)
            .is_some_and(|w| w.bytes().eq_ignore_ascii_case(b"ID"))
    };
    match args.len().checked_sub(words)? {
        1 => Some(words),
        2 | 3 if marked() => Some(words),
        _ => None,
    }
}

/// Reads a tail (`args` are its words: one of `tail_start`'s forms).
pub fn parse(args: &[RedisString]) -> Result<Tail, Error> {
    let (prefix, id) = match args {
        [packed] | [_, packed] => {
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
            (&p[..cut - 1], &p[cut..])
        }
        [_, prefix, id] => (prefix.bytes(), id.bytes()),
        _ => return Err(Error::Syntax),
    };
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
                        let want = [
                            format!("{at}:{print}:").as_bytes(),
                            rule.word().to_bytes(),
                            b":",
                            id,
                        ]
                        .concat();
                        let mut p = Packed::empty();
                        p.fill(at, print, rule, id);
                        assert_eq!(p.as_bytes(), &want[..]);
                    }
                }
            }
        }
    }
}
