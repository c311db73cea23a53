//! Fencing tokens: one server-wide counter, strictly increasing, always
//! below 2^53 so that every token is exact where numbers are IEEE doubles
//! (JavaScript, Lua, JSON): two different fences never compare equal
//! downstream.
//!
//! The floor `unix_ms << 10` is what keeps tokens increasing across a
//! restart that lost the dataset (and with it the saved counter): as long as
//! the wall clock does not go backwards and fewer than 1,024 tokens are
//! issued per millisecond on average (far above what one server grants), a
//! fresh server's first token is above every token handed out before. The
//! floor stays below the bound until the year 2248.

pub use super::bounds::MAX_FENCE;
use super::error::Error;

/// Tokens per millisecond the clock floor leaves room for: 2^10.
const FLOOR_SHIFT: u32 = 10;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FenceCounter {
    last: u64,
}

impl FenceCounter {
    pub const fn new() -> Self {
        FenceCounter { last: 0 }
    }

    /// The wall-clock floor for a given time (never past the bound).
    pub fn floor(now_ms: i64) -> u64 {
        ((now_ms.max(0) as u64) << FLOOR_SHIFT).min(MAX_FENCE)
    }

    /// The next token: above the last one and at or above the clock floor.
    /// At the bound the counter stops and every new grant is refused.
    pub fn next(&mut self, now_ms: i64) -> Result<u64, Error> {
        let next = (self.last + 1).max(Self::floor(now_ms));
        if next > MAX_FENCE {
            return Err(Error::Bound {
                name: "fence counter",
                max: MAX_FENCE,
            });
        }
        self.last = next;
        Ok(next)
    }

    /// Takes note of a token issued elsewhere (replication stream, AOF,
    /// RDB, RESTORE), so that later tokens stay above it. Callers pass only
    /// validated tokens; the bound is kept here all the same.
    pub fn observe(&mut self, fence: u64) {
        self.last = self.last.max(fence.min(MAX_FENCE));
    }

    pub fn last(&self) -> u64 {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seeded_from_clock() {
        let mut f = FenceCounter::default();
        let a = f.next(1_000).unwrap();
        assert_eq!(a, 1_000 << 10);
        assert_eq!(f.next(1_000).unwrap(), a + 1);
        assert!(f.next(2_000).unwrap() >= 2_000 << 10);
    }

    #[test]
    fn todays_clock_leaves_headroom() {
        // 2026-12-01 and 2200-01-01: both floors below 2^53.
        assert!(FenceCounter::floor(1_796_083_200_000) < MAX_FENCE / 4);
        assert!(FenceCounter::floor(7_258_118_400_000) < MAX_FENCE);
    }

    #[test]
    fn restart_without_data_stays_above() {
        let mut before = FenceCounter::default();
        let mut last = 0;
        for i in 0..1000 {
            last = before.next(5_000 + i / 100).unwrap();
        }
        let mut after = FenceCounter::default();
        assert!(after.next(5_011).unwrap() > last);
    }

    #[test]
    fn stops_at_the_bound() {
        let mut f = FenceCounter::default();
        f.observe(MAX_FENCE - 1);
        assert_eq!(f.next(0), Ok(MAX_FENCE));
        assert!(matches!(f.next(0), Err(Error::Bound { .. })));
        assert_eq!(f.last(), MAX_FENCE, "a refused grant changes nothing");
        f.observe(u64::MAX);
        assert_eq!(f.last(), MAX_FENCE);
        assert_eq!(FenceCounter::floor(i64::MAX), MAX_FENCE);
    }

    proptest! {
        #[test]
        fn strictly_increasing(steps in proptest::collection::vec((0i64..10_000, 0u64..u32::MAX as u64, any::<bool>()), 1..200)) {
            let mut f = FenceCounter::default();
            let mut prev = 0;
            let mut clock = 0;
            for (dt, seen, observe) in steps {
                clock += dt;
                if observe {
                    f.observe(seen);
                    prop_assert!(f.last() >= prev);
                    prev = f.last();
                } else {
                    let t = f.next(clock).unwrap();
                    prop_assert!(t > prev && t <= MAX_FENCE);
                    prev = t;
                }
            }
        }
    }
}
