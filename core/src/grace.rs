//! Restart grace (`restart-grace-ms`): for a while after the module loads,
//! a lock or permit that looks free may still be held by a holder from
//! before a restart that lost data. During the grace, taking a free lock or
//! new permits is refused (`-TRYAGAIN`; with `BLOCK` the client waits), and
//! `LOCK.EXTEND` / `SEM.EXTEND` of a missing entry re-create it for the
//! holder that is still working.

use super::error::Error;

/// The setting: off, a fixed number of ms, or each request's own ttl.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grace {
    Off,
    Ms(i64),
    /// Each request's own ttl-ms: a holder from before the restart can have
    /// had at most that long left.
    Auto,
}

impl Grace {
    /// `0` (off), a number of ms, or `auto`.
    pub fn parse(text: &[u8], max_ms: i64) -> Result<Grace, Error> {
        if text.eq_ignore_ascii_case(b"auto") {
            return Ok(Grace::Auto);
        }
        match super::number::parse_int(text) {
            Some(0) => Ok(Grace::Off),
            Some(ms) if (1..=max_ms).contains(&ms) => Ok(Grace::Ms(ms)),
            _ => Err(Error::Range {
                name: "restart-grace-ms",
                min: 0,
                max: max_ms,
            }),
        }
    }

    pub fn render(&self) -> String {
        match self {
            Grace::Off => "0".to_string(),
            Grace::Ms(ms) => ms.to_string(),
            Grace::Auto => "auto".to_string(),
        }
    }

    /// When the grace ends for a request with this ttl; None when off.
    pub fn ends_at(&self, loaded_ms: i64, ttl_ms: i64) -> Option<i64> {
        match self {
            Grace::Off => None,
            Grace::Ms(ms) => Some(loaded_ms.saturating_add(*ms)),
            Grace::Auto => Some(loaded_ms.saturating_add(ttl_ms)),
        }
    }

    /// How long the grace may still refuse some request: a fixed grace's
    /// rest, and for `auto` the rest for the longest ttl a request may
    /// carry (`max_ttl_ms`), since each request's own ttl decides. 0 when
    /// off or over.
    pub fn left_ms(&self, from_ms: i64, max_ttl_ms: i64, now_ms: i64) -> i64 {
        self.ends_at(from_ms, max_ttl_ms)
            .map_or(0, |end| end.saturating_sub(now_ms).max(0))
    }

    /// Is the grace still running for a request with this ttl?
    pub fn running(&self, loaded_ms: i64, ttl_ms: i64, now_ms: i64) -> bool {
        self.ends_at(loaded_ms, ttl_ms)
            .is_some_and(|end| now_ms < end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_render() {
        assert_eq!(Grace::parse(b"0", 100), Ok(Grace::Off));
        assert_eq!(Grace::parse(b"AUTO", 100), Ok(Grace::Auto));
        assert_eq!(Grace::parse(b"50", 100), Ok(Grace::Ms(50)));
        assert!(Grace::parse(b"101", 100).is_err());
        assert!(Grace::parse(b"-1", 100).is_err());
        assert!(Grace::parse(b"soon", 100).is_err());
        for g in [Grace::Off, Grace::Ms(7), Grace::Auto] {
            assert_eq!(Grace::parse(g.render().as_bytes(), 100), Ok(g));
        }
    }

    #[test]
    fn window() {
        assert!(!Grace::Off.running(0, 1000, 0));
        assert!(Grace::Ms(100).running(1000, 5, 1099));
        assert!(!Grace::Ms(100).running(1000, 5, 1100));
        assert!(Grace::Auto.running(1000, 300, 1299));
        assert!(
            !Grace::Auto.running(1000, 300, 1300),
            "its own ttl has passed"
        );
        assert_eq!(Grace::Auto.ends_at(1000, 300), Some(1300));
        assert_eq!(Grace::Off.left_ms(1000, 500, 1000), 0);
        assert_eq!(Grace::Ms(100).left_ms(1000, 500, 1040), 60);
        assert_eq!(Grace::Ms(100).left_ms(1000, 500, 2000), 0);
        assert_eq!(
            Grace::Auto.left_ms(1000, 500, 1100),
            400,
            "the longest ttl's rest"
        );
    }
}
