//! Effects sent to replicas and the AOF. Each names the full resulting
//! state with absolute unix-ms deadlines, so replaying it never reads a
//! clock or re-decides: a replica ends in exactly the master's state.
//!
//! `PADLOCK.LOCKSET key holder count fence deadline-ms`,
//! `PADLOCK.SEMSET key holder limit permits deadline-ms` and
//! `PADLOCK.RWSET key holder reads writes fence deadline-ms` are also what
//! an AOF rewrite writes; deadline 0 means "no expiry".
//!
//! These run on every write, so each argument Redis already has a string
//! for is passed as that string (`s`: Redis takes a reference, where `b`
//! would allocate and copy): the key, a holder that is one of the running
//! command's arguments, and small counts, made once. Fences and deadlines
//! go as digits from the stack (`b`).

use std::os::raw::c_char;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::Relaxed};

use redis_module::{raw, Context, RedisString};

use crate::glue::requests::piggy::Fields;

/// Decimal digits from a stack buffer: Redis builds one embedded string
/// from a buffer, but two allocations from a `long long` once the effect
/// reaches the AOF or a replica.
pub(crate) fn digits(buf: &mut itoa::Buffer, n: i64) -> (*const c_char, usize) {
    let s = buf.format(n);
    (s.as_ptr() as *const c_char, s.len())
}

type RawString = *mut raw::RedisModuleString;

// Plain statics, not thread-locals: every effect reads them, and in a
// cdylib a thread-local read is a call (`__tls_get_addr`). Commands and
// effects run on Redis' main thread only, so Relaxed is all they need.

/// The running command's arguments (argv, argc), while it runs.
static ARGV: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(null_mut());
static ARGC: AtomicUsize = AtomicUsize::new(0);

const SMALL: usize = 64;

/// Strings of the counts below `SMALL`, made on first use and kept.
static SMALL_STRINGS: [AtomicPtr<raw::RedisModuleString>; SMALL] =
    [const { AtomicPtr::new(null_mut()) }; SMALL];

/// A string padlock keeps for good, made on first use.
fn kept(slot: &AtomicPtr<raw::RedisModuleString>, make: impl FnOnce() -> RawString) -> RawString {
    let s = slot.load(Relaxed);
    if !s.is_null() {
        return s;
    }
    let s = make();
    slot.store(s, Relaxed);
    s
}

/// Runs a command body with its arguments known to `send`.
pub fn during_command<R>(argv: *const RawString, argc: usize, f: impl FnOnce() -> R) -> R {
    struct Restore(RawString, usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            ARGV.store(self.0, Relaxed);
            ARGC.store(self.1, Relaxed);
        }
    }
    let _restore = Restore(
        ARGV.swap(argv as RawString, Relaxed),
        ARGC.swap(argc, Relaxed),
    );
    f()
}

fn bytes_of(s: RawString) -> &'static [u8] {
    let mut len = 0;
    // SAFETY: a live string of the running command (or one padlock keeps).
    unsafe {
        let p = rm!(RedisModule_StringPtrLen)(s, &mut len);
        std::slice::from_raw_parts(p as *const u8, len)
    }
}

/// The running command's argument equal to `bytes`, if any.
fn argument(bytes: &[u8]) -> Option<RawString> {
    let (argv, argc) = (ARGV.load(Relaxed) as *const RawString, ARGC.load(Relaxed));
    if argv.is_null() {
        return None;
    }
    // SAFETY: set by `during_command` from Redis' argv, alive while the
    // command runs (and cleared when it returns).
    let args = unsafe { std::slice::from_raw_parts(argv, argc) };
    // A single-key command's holder, the word looked up most, is third.
    let third = args.get(2).copied().filter(|&s| bytes_of(s) == bytes);
    third.or_else(|| args.iter().skip(1).copied().find(|&s| bytes_of(s) == bytes))
}

#[inline]
fn small(n: i64) -> Option<RawString> {
    let slot = SMALL_STRINGS.get(usize::try_from(n).ok()?)?;
    let s = kept(slot, || {
        let mut buf = itoa::Buffer::new();
        let (p, len) = digits(&mut buf, n);
        // SAFETY: a string without a context: padlock owns it for good.
        unsafe { rm!(RedisModule_CreateString)(null_mut(), p, len) }
    });
    Some(s).filter(|s| !s.is_null())
}

/// Strings made for one effect, freed once Redis took its references.
pub(crate) struct Made<'c> {
    ctx: &'c Context,
    strings: [RawString; 4],
    len: usize,
}

impl<'c> Made<'c> {
    pub fn new(ctx: &'c Context) -> Self {
        Made {
            ctx,
            strings: [null_mut(); 4],
            len: 0,
        }
    }

    pub fn make(&mut self, bytes: &[u8]) -> RawString {
        // SAFETY: a new string, freed in Drop.
        let s = unsafe {
            rm!(RedisModule_CreateString)(
                self.ctx.ctx,
                bytes.as_ptr() as *const c_char,
                bytes.len(),
            )
        };
        if self.len < self.strings.len() {
            self.strings[self.len] = s;
            self.len += 1;
        }
        s
    }

    /// The holder: the command's own argument when it is one.
    pub fn holder(&mut self, holder: &[u8]) -> RawString {
        argument(holder).unwrap_or_else(|| self.make(holder))
    }

    #[inline]
    pub fn count(&mut self, n: u64) -> RawString {
        small(n as i64).unwrap_or_else(|| self.make(itoa::Buffer::new().format(n).as_bytes()))
    }
}

impl Drop for Made<'_> {
    fn drop(&mut self) {
        for s in &self.strings[..self.len] {
            // SAFETY: made in `make`; Redis holds its own references.
            unsafe { rm!(RedisModule_FreeString)(self.ctx.ctx, *s) };
        }
    }
}

/// Sends `cmd` with its fixed arguments `fmt`/`args...`, plus the word
/// `at-ms:print:rule:request-id` when the running request's id rides on
/// this effect (`requests::piggy`); `$tailfmt` is `$fmt` and "b". (A
/// macro: the module API is variadic.)
macro_rules! replicate_with_tail {
    ($ctx:expr, $tail:expr, $cmd:expr, $fmt:literal, $tailfmt:literal, $($arg:expr),*) => {{
        match $tail {
            // SAFETY: the format names exactly the arguments passed; the
            // strings and buffers live until the call returns.
            None => unsafe {
                rm!(RedisModule_Replicate)($ctx.ctx, $cmd, $fmt.as_ptr(), $($arg),*);
            },
            Some(t) => {
                let packed = t.as_bytes();
                // SAFETY: as above, the tail being "b".
                unsafe {
                    rm!(RedisModule_Replicate)(
                        $ctx.ctx, $cmd, $tailfmt.as_ptr(), $($arg),*,
                        packed.as_ptr() as *const ::std::os::raw::c_char, packed.len(),
                    );
                }
            }
        }
    }};
}
pub(crate) use replicate_with_tail;

pub(crate) fn fields(fence: u64, count: u64, reads: u64, writes: u64) -> Fields {
    Fields {
        fence,
        count,
        reads,
        writes,
    }
}

/// `PADLOCK.REQUESTID key holder id at-ms print I value` (see
/// `requests::saved`): key, holder and id are the command's own arguments
/// when they are (always, but for a waiter granted later).
pub fn request_id(ctx: &Context, words: [&[u8]; 3], at_ms: i64, print: u64, value: i64) {
    let mut m = Made::new(ctx);
    let [k, h, i] = words.map(|w| argument(w).unwrap_or_else(|| m.make(w)));
    let (mut a, mut p, mut v) = (
        itoa::Buffer::new(),
        itoa::Buffer::new(),
        itoa::Buffer::new(),
    );
    let ((ap, al), (pp, pl), (vp, vl)) = (
        digits(&mut a, at_ms),
        digits(&mut p, print as i64),
        digits(&mut v, value),
    );
    // SAFETY: as in `lock_set`; "c" is a C string that lives for good.
    unsafe {
        rm!(RedisModule_Replicate)(
            ctx.ctx,
            c"padlock.requestid".as_ptr(),
            c"sssbbcb".as_ptr(),
            k,
            h,
            i,
            ap,
            al,
            pp,
            pl,
            c"I".as_ptr(),
            vp,
            vl,
        );
    }
}

pub fn del(ctx: &Context, key: &RedisString) {
    // SAFETY: format "s" with one live string.
    unsafe {
        rm!(RedisModule_Replicate)(ctx.ctx, c"DEL".as_ptr(), c"s".as_ptr(), key.inner);
    }
}
