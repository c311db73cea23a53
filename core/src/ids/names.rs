//! A group's key and holder, in one shared allocation: every request with
//! `ID` that starts a group (a client's every acquire) copies both, and an
//! allocation through Redis' allocator costs more than the copy. The
//! memory's maps key by one part of it (`KeyPart`, `HolderPart`), looked
//! up by plain bytes.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::rc::Rc;

/// The key's length (4 bytes, little-endian), the key, the holder: one
/// pointer wide, as each of the memory's maps and orders holds one.
#[derive(Clone)]
pub struct Names(Rc<[u8]>);

/// Bytes before the key.
const LEN: usize = 4;

/// The longest names made on the stack.
const STACK: usize = 192;

impl Names {
    pub fn new(key: &[u8], holder: &[u8]) -> Names {
        // A key never nears 4 GB (Redis' bulk strings are far smaller);
        // past it the split would be wrong, never a panic.
        let split = u32::try_from(key.len()).unwrap_or(u32::MAX).to_le_bytes();
        let parts: [&[u8]; 3] = [&split, key, holder];
        let len = LEN + key.len() + holder.len();
        // Made on the stack when it fits (keys and holders are short),
        // so the Rc is the only allocation.
        let mut stack = [0u8; STACK];
        if let Some(buf) = stack.get_mut(..len) {
            let mut at = 0;
            for part in parts {
                buf[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
            return Names(Rc::from(&*buf));
        }
        Names(Rc::from(parts.concat()))
    }

    fn split(&self) -> usize {
        let mut len = [0u8; LEN];
        if let Some(b) = self.0.get(..LEN) {
            len.copy_from_slice(b);
        }
        LEN.saturating_add(u32::from_le_bytes(len) as usize)
    }

    pub fn key(&self) -> &[u8] {
        self.0.get(LEN..self.split()).unwrap_or_default()
    }

    pub fn holder(&self) -> &[u8] {
        self.0.get(self.split()..).unwrap_or_default()
    }

    fn parts(&self) -> (&[u8], &[u8]) {
        (self.key(), self.holder())
    }
}

impl PartialEq for Names {
    fn eq(&self, other: &Names) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for Names {}

impl Hash for Names {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl PartialOrd for Names {
    fn partial_cmp(&self, other: &Names) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Names {
    fn cmp(&self, other: &Names) -> Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl fmt::Debug for Names {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (k, h) = self.parts();
        write!(
            f,
            "{:?}/{:?}",
            String::from_utf8_lossy(k),
            String::from_utf8_lossy(h)
        )
    }
}

/// Declares a map key that is one part of a `Names`, equal to and hashed
/// as that part's bytes (so that a map of them is looked up by bytes).
macro_rules! part {
    ($name:ident, $part:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Debug)]
        pub struct $name(pub Names);

        impl Borrow<[u8]> for $name {
            fn borrow(&self) -> &[u8] {
                self.0.$part()
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &$name) -> bool {
                self.0.$part() == other.0.$part()
            }
        }

        impl Eq for $name {}

        impl Hash for $name {
            fn hash<H: Hasher>(&self, state: &mut H) {
                self.0.$part().hash(state);
            }
        }
    };
}

part!(
    KeyPart,
    key,
    "A key, as the names of one of its groups hold it."
);
part!(
    HolderPart,
    holder,
    "A holder, as its group's names hold it."
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn parts_read_and_find_as_their_bytes() {
        let n = Names::new(b"acct:1", b"bob");
        assert_eq!((n.key(), n.holder()), (&b"acct:1"[..], &b"bob"[..]));
        // Same bytes in all, another split: other names.
        assert_ne!(n, Names::new(b"acct:1b", b"ob"));
        assert!(Names::new(b"a", b"z") < Names::new(b"b", b"a"));
        let mut keys = HashMap::new();
        keys.insert(KeyPart(n.clone()), 1);
        let mut holders = HashMap::new();
        holders.insert(HolderPart(n.clone()), 2);
        assert_eq!(keys.get(&b"acct:1"[..]), Some(&1));
        assert_eq!(holders.get(&b"bob"[..]), Some(&2));
        assert_eq!(keys.get(&b"acct:1bob"[..]), None);
        let long = vec![b'k'; 300];
        let n = Names::new(&long, b"h");
        assert_eq!((n.key(), n.holder()), (&long[..], &b"h"[..]));
        let empty = Names::new(b"", b"");
        assert_eq!((empty.key(), empty.holder()), (&b""[..], &b""[..]));
        assert_eq!(std::mem::size_of::<Names>(), 16);
    }
}
