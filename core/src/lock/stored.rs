//! A lock as stored (RDB, `RESTORE`, `PADLOCK.LOCKSET`): see `crate::stored`.

use crate::bounds::MAX_COUNT;
use crate::lock::Lock;
use crate::since::Since;
use crate::stored::{fence, holder, Invalid};

/// A lock as stored: the RDB loader and `PADLOCK.LOCKSET` both build it
/// here.
pub fn lock(h: &[u8], count: u64, f: u64) -> Result<Lock, Invalid> {
    holder(h)?;
    let count = u32::try_from(count)
        .ok()
        .filter(|c| (1..=MAX_COUNT).contains(&u64::from(*c)))
        .ok_or("reentry count out of range")?;
    fence(f)?;
    Ok(Lock {
        holder: h.into(),
        count,
        fence: f,
        since: Since::UNKNOWN,
    })
}
