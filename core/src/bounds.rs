//! Every bound a stored value or a counter keeps, in one place: the rules
//! stop at them with an error naming the bound, and the one validation of
//! stored states (`stored`) refuses anything past them, so whatever the
//! server accepts it can save, load, `DUMP` and `RESTORE` again.

/// The largest fence: 2^53 - 1, exact as an IEEE double.
pub const MAX_FENCE: u64 = (1 << 53) - 1;
/// The most holds one holder has on one key (lock reentries, read or write
/// holds of a read-write lock): 2^31 - 1, like permits.
pub const MAX_COUNT: u64 = i32::MAX as u64;
/// Largest semaphore limit and permit count: 2^31 - 1.
pub const MAX_PERMITS: u64 = i32::MAX as u64;
/// Latest deadline accepted (unix ms, about the year 287,000): far past any
/// real lease, and a deadline plus any ttl still fits an i64.
pub const MAX_DEADLINE_MS: i64 = 1 << 53;
/// Longest holder any configuration accepts (the `max-holder-len` ceiling).
pub const MAX_HOLDER_LEN: usize = 65_536;

/// One more hold (a reentry, a read or write hold), refused with an error
/// naming `what` at `MAX_COUNT`.
pub fn one_more(count: u64, what: &'static str) -> Result<u64, super::error::Error> {
    match count.checked_add(1) {
        Some(n) if n <= MAX_COUNT => Ok(n),
        _ => Err(super::error::Error::Bound {
            name: what,
            max: MAX_COUNT,
        }),
    }
}
