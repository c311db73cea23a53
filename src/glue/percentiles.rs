//! How long granted waiters waited and how long holds lasted, per kind, in
//! Redis' own `latencystats` form (`p50=...,p99=...,p99.9=...`, in
//! microseconds). HDR histograms with two significant digits, as Redis
//! keeps its command latencies; only a grant after a wait, a final release
//! or an expiry records, and a record costs about a hundred instructions
//! (`make bench` holds every command within 3% of its cost without them).
//!
//! Only the master that decided records: replicas apply effects that carry
//! no start time, so their histograms stay empty, and a hold begun before a
//! restart or failover (its start not saved) is not counted when it ends.
//!
//! The histograms live on Redis' main thread (a thread-local: no lock to
//! take), where every command, callback and `INFO` runs.

use std::cell::RefCell;
use std::os::raw::c_int;

use hdrhistogram::Histogram;

use crate::core::since::Since;

/// Longest duration kept apart (about 12 days); longer ones count as this.
const HIGHEST_USEC: u64 = 1 << 40;

/// Which distribution: a kind's waits or its holds.
#[derive(Clone, Copy)]
pub struct Percentiles {
    slot: usize,
}

const SLOTS: usize = 8;

/// The bucket bounds `buckets` reports, in microseconds.
const BOUNDS_USEC: [u64; 6] = [1_000, 10_000, 100_000, 1_000_000, 10_000_000, 60_000_000];

thread_local! {
    static HISTOGRAMS: RefCell<[Option<Histogram<u64>>; SLOTS]> =
        const { RefCell::new([const { None }; SLOTS]) };
}

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: c_int, ts: *mut Timespec) -> c_int;
}

/// The wall clock in ms (`CLOCK_REALTIME`, the clock `RM_Milliseconds`
/// reads), read directly: a final release reads it once, and through std or
/// Redis the read costs several times the call.
pub fn now_ms() -> i64 {
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec (64-bit time_t and long on
    // the 64-bit Linux targets padlock builds for); CLOCK_REALTIME is 0.
    if unsafe { clock_gettime(0, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
}

impl Percentiles {
    /// The waits of kind `n` (each kind its own number below 4).
    pub const fn waits(n: usize) -> Percentiles {
        Percentiles { slot: 2 * n }
    }

    /// The holds of kind `n`.
    pub const fn holds(n: usize) -> Percentiles {
        Percentiles { slot: 2 * n + 1 }
    }

    /// Records one duration of `usec` microseconds.
    pub fn record(self, usec: i64) {
        with(self.slot, |h| {
            if h.is_none() {
                // Valid bounds: never refused (if it were, nothing is kept).
                *h = Histogram::new_with_bounds(1, HIGHEST_USEC, 2).ok();
            }
            if let Some(h) = h {
                h.saturating_record(usec.clamp(1, HIGHEST_USEC as i64) as u64);
            }
        });
    }

    /// A hold begun at `since` ended at `end_ms` (not counted when its
    /// start is unknown).
    pub fn held(self, since: Since, end_ms: i64) {
        if let Some(ms) = since.until(end_ms) {
            self.record(ms.saturating_mul(1000));
        }
    }

    /// `p50=...,p99=...,p99.9=...` with three decimals, as Redis prints
    /// them; all zero before anything was recorded.
    pub fn line(self) -> String {
        let mut at = [0.0f64; 3];
        with(self.slot, |h| {
            if let Some(h) = h.as_ref().filter(|h| !h.is_empty()) {
                for (v, q) in at.iter_mut().zip([0.50, 0.99, 0.999]) {
                    *v = h.value_at_quantile(q) as f64;
                }
            }
        });
        format!("p50={:.3},p99={:.3},p99.9={:.3}", at[0], at[1], at[2])
    }

    /// Cumulative counts at fixed bounds, as counters Prometheus can
    /// `rate()` over any window (the percentiles above are since load):
    /// `le_1000=...,le_10000=...,...,le_60000000=...,count=...`, in
    /// microseconds (1 ms to 60 s). A bound counts what the histogram
    /// holds up to it, within its two significant digits.
    pub fn buckets(self) -> String {
        let mut counts = [0u64; BOUNDS_USEC.len()];
        let mut total = 0;
        with(self.slot, |h| {
            if let Some(h) = h.as_ref() {
                for (c, b) in counts.iter_mut().zip(BOUNDS_USEC) {
                    *c = h.count_between(0, b);
                }
                total = h.len();
            }
        });
        let mut out = String::with_capacity(128);
        for (c, b) in counts.iter().zip(BOUNDS_USEC) {
            out.push_str(&format!("le_{b}={c},"));
        }
        out.push_str(&format!("count={total}"));
        out
    }

    /// `CONFIG RESETSTAT`.
    pub fn reset(self) {
        with(self.slot, |h| *h = None);
    }
}

fn with(slot: usize, f: impl FnOnce(&mut Option<Histogram<u64>>)) {
    // A busy borrow (impossible: nothing here calls back) skips the record.
    let _ = HISTOGRAMS.try_with(|all| {
        if let Ok(mut all) = all.try_borrow_mut() {
            if let Some(h) = all.get_mut(slot) {
                f(h);
            }
        }
    });
}
