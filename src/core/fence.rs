//! Fencing tokens: one server-wide counter, strictly increasing.
//!
//! The floor `unix_ms << 16` is what keeps tokens increasing across a restart
//! that lost the dataset (and with it the saved counter): as long as the wall
//! clock does not go backwards and fewer than 65,536 tokens are issued per
//! millisecond on average, a fresh server's first token is above every token
//! handed out before.

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FenceCounter {
    last: u64,
}

impl FenceCounter {
    pub const fn new() -> Self {
        FenceCounter { last: 0 }
    }

    /// The wall-clock floor for a given time.
    pub fn floor(now_ms: i64) -> u64 {
        (now_ms.max(0) as u64) << 16
    }

    /// The next token: above the last one and at or above the clock floor.
    pub fn next(&mut self, now_ms: i64) -> u64 {
        self.last = (self.last + 1).max(Self::floor(now_ms));
        self.last
    }

    /// Takes note of a token issued elsewhere (replication stream, AOF,
    /// RDB), so that later tokens stay above it.
    pub fn observe(&mut self, fence: u64) {
        self.last = self.last.max(fence);
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
        let a = f.next(1_000);
        assert_eq!(a, 1_000 << 16);
        assert_eq!(f.next(1_000), a + 1);
        assert!(f.next(2_000) >= 2_000 << 16);
    }

    #[test]
    fn restart_without_data_stays_above() {
        let mut before = FenceCounter::default();
        let mut last = 0;
        for i in 0..1000 {
            last = before.next(5_000 + i / 100);
        }
        let mut after = FenceCounter::default();
        assert!(after.next(5_011) > last);
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
                    let t = f.next(clock);
                    prop_assert!(t > prev);
                    prev = t;
                }
            }
        }
    }
}
