//! When a hold began, for the hold percentiles: the low 32 bits of the
//! master's unix ms. Four bytes, so that a lock (holder, fence, count and
//! this) stays in the allocator's 32-byte class; a duration is right for
//! holds shorter than 24 days (longer ones wrap). Not stored or
//! replicated: a hold loaded or received from a master has none.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Since(u32);

impl Since {
    /// Unknown: loaded, restored, received from a master.
    pub const UNKNOWN: Since = Since(0);

    pub fn at(now_ms: i64) -> Since {
        // 0 is "unknown": one ms in 2^32 is counted from the next one.
        Since((now_ms as u32).max(1))
    }

    /// Milliseconds from the start to `end_ms`; None when unknown. A clock
    /// stepped back reads as 0.
    pub fn until(self, end_ms: i64) -> Option<i64> {
        if self.0 == 0 {
            return None;
        }
        let d = (end_ms as u32).wrapping_sub(self.0);
        Some(if d > i32::MAX as u32 { 0 } else { i64::from(d) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_across_the_wrap() {
        let t = (1i64 << 32) - 5;
        assert_eq!(Since::at(t).until(t + 105), Some(105));
        assert_eq!(
            Since::at(1_800_000_000_000).until(1_800_000_000_250),
            Some(250)
        );
        assert_eq!(Since::UNKNOWN.until(5), None);
        assert_eq!(Since::at(1000).until(990), Some(0), "a clock stepped back");
        assert_eq!(
            Since::at(1 << 32).until(1 << 32),
            Some(0),
            "the one ms that reads as 1"
        );
    }
}
