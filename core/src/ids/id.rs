//! A request-id as remembered: inline up to `INLINE` bytes, which holds
//! what the client libraries send (a random prefix and a counter, 18-33
//! bytes), on the heap past that. Every request with `ID` stores one, and
//! an allocation through Redis' allocator (with its accounting) cost
//! about a tenth of what the id costs the request altogether; inline it
//! also takes less memory than a pointer and the heap block it named.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// The most bytes held inline: the type stays 40 bytes.
pub const INLINE: usize = 38;

#[derive(Clone)]
pub struct Id(Repr);

#[derive(Clone)]
enum Repr {
    Inline(u8, [u8; INLINE]),
    Heap(Box<[u8]>),
}

impl From<&[u8]> for Id {
    fn from(bytes: &[u8]) -> Id {
        match u8::try_from(bytes.len()) {
            Ok(n) if bytes.len() <= INLINE => {
                let mut buf = [0; INLINE];
                buf[..bytes.len()].copy_from_slice(bytes);
                Id(Repr::Inline(n, buf))
            }
            _ => Id(Repr::Heap(bytes.into())),
        }
    }
}

impl Deref for Id {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline(n, buf) => &buf[..usize::from(*n).min(INLINE)],
            Repr::Heap(b) => b,
        }
    }
}

// Equal and hashed as the bytes they hold, whichever way they are held.
impl PartialEq for Id {
    fn eq(&self, other: &Id) -> bool {
        **self == **other
    }
}

impl Eq for Id {}

impl Hash for Id {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;

    fn hash_of<T: Hash + ?Sized>(t: &T) -> u64 {
        let mut h = DefaultHasher::new();
        t.hash(&mut h);
        h.finish()
    }

    #[test]
    fn holds_every_length_as_given() {
        assert_eq!(std::mem::size_of::<Id>(), 40);
        for n in 0..=super::super::MAX_ID_LEN {
            let bytes: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            let id = Id::from(&bytes[..]);
            assert_eq!(&*id, &bytes[..]);
            assert_eq!(matches!(id.0, Repr::Inline(..)), n <= INLINE);
            assert_eq!(hash_of(&id), hash_of(&bytes[..]));
            assert_eq!(id.clone(), id);
        }
        assert_ne!(Id::from(&b"a"[..]), Id::from(&b"a\0"[..]));
    }
}
