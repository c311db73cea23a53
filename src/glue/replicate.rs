//! Effects sent to replicas and the AOF. Each names the full resulting
//! state with absolute unix-ms deadlines, so replaying it never reads a
//! clock or re-decides: a replica ends in exactly the master's state.
//!
//! `PADLOCK.LOCKSET key holder count fence deadline-ms`,
//! `PADLOCK.SEMSET key holder limit permits deadline-ms` and
//! `PADLOCK.RWSET key holder reads writes fence deadline-ms` are also what
//! an AOF rewrite writes; deadline 0 means "no expiry".
//!
//! These run on every write, so they go through `RedisModule_Replicate`'s
//! own format (no intermediate strings).

use std::ffi::CStr;
use std::os::raw::c_char;

use redis_module::{Context, RedisString};

use crate::core::lock::Lock;
use crate::core::rwlock::Effect;

pub const LOCKSET: &str = "PADLOCK.LOCKSET";
pub const SEMSET: &str = "PADLOCK.SEMSET";
pub const RWSET: &str = "PADLOCK.RWSET";

/// Decimal digits of `n` in a stack buffer: Redis builds one embedded
/// string from a buffer, but two allocations from a `long long` once the
/// effect reaches the AOF or a replica.
struct Digits {
    buf: [u8; 20],
    start: usize,
}

/// "00" to "99": two digits per division.
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

impl Digits {
    const EMPTY: Digits = Digits {
        buf: [0; 20],
        start: 20,
    };

    fn new(n: i64) -> Digits {
        let mut d = Digits::EMPTY;
        let mut v = n.unsigned_abs();
        while v >= 100 {
            let pair = (v % 100) as usize * 2;
            v /= 100;
            d.start -= 2;
            d.buf[d.start..d.start + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        }
        if v >= 10 {
            let pair = v as usize * 2;
            d.start -= 2;
            d.buf[d.start..d.start + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        } else {
            d.start -= 1;
            d.buf[d.start] = b'0' + v as u8;
        }
        if n < 0 {
            d.start -= 1;
            d.buf[d.start] = b'-';
        }
        d
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    fn ptr_len(&self) -> (*const c_char, usize) {
        (self.bytes().as_ptr() as *const c_char, self.bytes().len())
    }
}

/// `CMD key holder n1 n2 n3 [n4]`, every number as digits (`l` would cost
/// Redis two allocations per number).
fn send(ctx: &Context, cmd: &CStr, key: &RedisString, holder: &[u8], nums: &[i64]) {
    let mut d = [Digits::EMPTY, Digits::EMPTY, Digits::EMPTY, Digits::EMPTY];
    for (slot, n) in d.iter_mut().zip(nums) {
        *slot = Digits::new(*n);
    }
    let ((ap, al), (bp, bl), (cp, cl), (dp, dl)) = (
        d[0].ptr_len(),
        d[1].ptr_len(),
        d[2].ptr_len(),
        d[3].ptr_len(),
    );
    let fmt = if nums.len() == 4 { c"sbbbbb" } else { c"sbbbb" };
    // SAFETY: the format names exactly the arguments it reads (a trailing
    // one it does not name is ignored); key is a live string, the buffers
    // live until the call returns.
    unsafe {
        rm!(RedisModule_Replicate)(
            ctx.ctx,
            cmd.as_ptr(),
            fmt.as_ptr(),
            key.inner,
            holder.as_ptr() as *const c_char,
            holder.len(),
            ap,
            al,
            bp,
            bl,
            cp,
            cl,
            dp,
            dl,
        );
    }
}

pub fn lock_set(ctx: &Context, key: &RedisString, lock: &Lock, deadline_ms: i64) {
    send(
        ctx,
        c"PADLOCK.LOCKSET",
        key,
        &lock.holder,
        &[lock.count as i64, lock.fence as i64, deadline_ms],
    );
}

/// One semaphore holder's new state; permits 0 removes the holder (and the
/// key with its last holder).
pub fn sem_set(
    ctx: &Context,
    key: &RedisString,
    holder: &[u8],
    limit: u64,
    permits: u64,
    deadline_ms: i64,
) {
    send(
        ctx,
        c"PADLOCK.SEMSET",
        key,
        holder,
        &[limit as i64, permits as i64, deadline_ms],
    );
}

/// One read-write lock holder's new state; no holds removes the holder
/// (and the key with its last holder).
pub fn rw_set(ctx: &Context, key: &RedisString, e: &Effect<'_>) {
    send(
        ctx,
        c"PADLOCK.RWSET",
        key,
        &e.holder,
        &[
            e.reads as i64,
            e.writes as i64,
            e.fence as i64,
            e.deadline_ms,
        ],
    );
}

pub fn del(ctx: &Context, key: &RedisString) {
    // SAFETY: format "s" with one live string.
    unsafe {
        rm!(RedisModule_Replicate)(ctx.ctx, c"DEL".as_ptr(), c"s".as_ptr(), key.inner);
    }
}

#[cfg(test)]
mod tests {
    use super::Digits;

    #[test]
    fn digits() {
        for n in [
            0,
            7,
            -7,
            10,
            99,
            100,
            101,
            1234567890123,
            i64::MAX,
            i64::MIN,
        ] {
            assert_eq!(Digits::new(n).bytes(), n.to_string().as_bytes());
        }
    }
}
