//! A lock's queued request (`LOCK.ACQUIRE ... BLOCK`, `LOCK.MACQUIRE ...
//! BLOCK`) as the waiting engine serves it: granted when its keys free,
//! taken back should its reply never arrive.

use std::rc::Rc;

use redis_module::{Context, RedisString};

use super::{keep, release, renew, try_acquire, try_macquire, Key, Lock};
use crate::core::error::Error;
use crate::core::lock::Grant;
use crate::glue::blocking::Reply;
use crate::glue::types::Value;
use crate::glue::waiting::{Granted, TakeBack, Try, Want};

/// True as soon as one of `names` is held by someone else: a waiter for
/// many keys is refused after reading as few as it takes.
fn held_by_another(ctx: &Context, names: &[RedisString], holder: &[u8]) -> Result<bool, Error> {
    for name in names {
        let mut key = Key::read(ctx, name);
        if key.value::<Lock>()?.is_some_and(|l| *l.holder != *holder) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `LOCK.ACQUIRE ... BLOCK` (one key, replied with its fence) and
/// `LOCK.MACQUIRE ... BLOCK` (all keys at once, replied with an array).
struct Locks {
    ttl_ms: i64,
    multi: bool,
    /// `KEEP`: the waiting client, bound when granted.
    keep: Option<u64>,
}

/// The fences a waiter was granted, one per key (one lock's without a
/// `Vec`: every single-key grant makes one).
enum Fences {
    One(u64),
    Many(Vec<u64>),
}

impl Fences {
    fn all(&self) -> &[u64] {
        match self {
            Fences::One(f) => std::slice::from_ref(f),
            Fences::Many(fs) => fs,
        }
    }
}

impl TakeBack for Fences {
    fn take_back(&self, ctx: &Context, names: &[RedisString], holder: &[u8]) {
        for (name, fence) in names.iter().zip(self.all()) {
            let _ = release(ctx, name, holder, Some(*fence));
        }
    }
}

impl Want for Locks {
    fn kind(&self) -> &'static crate::glue::types::KindInfo {
        Lock::INFO
    }

    fn try_grant(
        &self,
        ctx: &Context,
        names: &[RedisString],
        holder: &[u8],
        client: u64,
        now: i64,
    ) -> Result<Option<Granted>, Error> {
        let client = self.keep.map(|_| client);
        let fences = match (self.multi, names) {
            (true, _) if held_by_another(ctx, names, holder)? => None,
            (true, _) => try_macquire(ctx, names, holder, self.ttl_ms, now)?.map(Fences::Many),
            (false, [name]) => {
                let bound = (client, self.ttl_ms, renew as keep::Renew);
                let attempt = || {
                    let a = try_acquire(ctx, name, holder, self.ttl_ms, Try::serving(now));
                    Ok::<_, Error>(a?.got())
                };
                let bind = |g: &Grant| keep(ctx, name, holder, client, self.ttl_ms, g.fence);
                keep::grant_bound((name.as_slice(), holder), bound, attempt, bind)?
                    .map(|g| Fences::One(g.fence))
            }
            (false, _) => None,
        };
        if self.multi {
            for (name, fence) in names.iter().zip(fences.iter().flat_map(Fences::all)) {
                keep(ctx, name, holder, client, self.ttl_ms, *fence);
            }
        }
        Ok(fences.map(|fs| Granted {
            reply: match (self.multi, &fs) {
                (false, Fences::One(f)) => Reply::Int(*f as i64),
                _ => Reply::Ints(fs.all().iter().map(|f| *f as i64).collect()),
            },
            take_back: Box::new(fs),
            sole: true,
            // Both a fresh grant and a reentry end the lease `ttl` from now
            // (a lease bound with `KEEP` is written farther: read back).
            frees_at: (!self.multi && self.keep.is_none()).then(|| now.saturating_add(self.ttl_ms)),
        }))
    }

    fn rule(&self) -> Option<crate::glue::requests::piggy::Rule> {
        use crate::glue::requests::piggy::Rule;
        (!self.multi).then_some(Rule::Fence)
    }

    fn ttl_ms(&self) -> i64 {
        self.ttl_ms
    }
}

pub fn want_one(ttl_ms: i64, keep: Option<u64>) -> Rc<dyn Want> {
    Rc::new(Locks {
        ttl_ms,
        multi: false,
        keep,
    })
}

pub fn want_multi(ttl_ms: i64, keep: Option<u64>) -> Rc<dyn Want> {
    Rc::new(Locks {
        ttl_ms,
        multi: true,
        keep,
    })
}
