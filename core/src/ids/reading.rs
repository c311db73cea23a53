//! Reading the whole memory out: what saving it (RDB, AOF rewrite) needs.

use super::{Address, Memory, Remembered};

impl Memory {
    /// Every remembered id, oldest group first (to save).
    pub fn all(&self) -> impl Iterator<Item = (&Address, &Remembered)> + '_ {
        self.order.iter().flat_map(move |a| {
            self.group(a)
                .into_iter()
                .flat_map(move |g| g.ids.iter().map(move |r| (a, r)))
        })
    }

    /// The ids remembered for one key, by holder (an AOF rewrite writes
    /// them after the key's value), each with its holder.
    pub fn of_key<'a>(
        &'a self,
        db: i32,
        key: &[u8],
    ) -> impl Iterator<Item = (&'a [u8], &'a Remembered)> + 'a {
        self.groups
            .get(&db)
            .and_then(|keys| keys.get(key))
            .into_iter()
            .flat_map(|holders| holders.iter())
            .flat_map(|(h, g)| g.ids.iter().map(move |r| (h.0.holder(), r)))
    }
}
