//! What a request with an id is made of, as the commands read it: where
//! its `ID` and `BLOCK` values sit, whether the id is well formed, and the
//! print of its other arguments.

use super::{Error, MAX_ID_LEN};

/// A multiply-rotate hash for `print`: unkeyed, so that a print is the same
/// on every server and after a restart (it is saved and replicated). Never
/// used for a map (those are seeded: `hash::Map`).
#[derive(Default, Clone, Copy)]
struct Quick(u64);

/// The last 1-7 bytes of a string as one little-endian word (the bytes
/// shifted in one by one, low first), from two overlapping loads instead
/// of a loop or a variable-length copy: every argument of every request
/// with `ID` ends in one.
#[inline]
fn tail_word(rest: &[u8]) -> u64 {
    let n = rest.len();
    match n {
        0 => 0,
        1..=3 => {
            u64::from(rest[0])
                | u64::from(rest[n / 2]) << (8 * (n / 2))
                | u64::from(rest[n - 1]) << (8 * (n - 1))
        }
        _ => {
            let word = |at: usize| {
                u64::from(u32::from_le_bytes([
                    rest[at],
                    rest[at + 1],
                    rest[at + 2],
                    rest[at + 3],
                ]))
            };
            word(0) | word(n - 4) << (8 * (n - 4))
        }
    }
}

impl Quick {
    #[inline]
    fn step(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for Quick {
    /// Eight bytes a step, little-endian, the last step zero-padded (read
    /// without a copy loop: every request with an id hashes its arguments).
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut a = [0u8; 8];
            a.copy_from_slice(w);
            self.step(u64::from_le_bytes(a));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            self.step(tail_word(rest));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.step(n as u64);
    }

    /// Mixed, so that the low bits (a table's bucket) depend on every
    /// input bit.
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h
    }
}

/// A stable 64-bit hash of a request's arguments (each one's length and
/// bytes through `Quick`, eight bytes a step): the same on every server
/// and after a restart, since it is saved and replicated.
pub fn print<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    let mut p = Print::default();
    for a in args {
        p.add(a);
    }
    p.finish()
}

/// `print` one argument at a time, for a caller that leaves some out as
/// it goes (a loop of its own costs less than an iterator chain that
/// filters them).
#[derive(Clone, Copy)]
pub struct Print(Quick);

impl Default for Print {
    fn default() -> Print {
        Print(Quick(0x9e37_79b9_7f4a_7c15))
    }
}

impl Print {
    #[inline]
    pub fn add(&mut self, arg: &[u8]) {
        use std::hash::Hasher;
        self.0.write_usize(arg.len());
        self.0.write(arg);
    }

    pub fn finish(&self) -> u64 {
        use std::hash::Hasher;
        self.0.finish()
    }
}

/// Checks a request-id's length.
pub fn valid_id(id: &[u8]) -> bool {
    (1..=MAX_ID_LEN).contains(&id.len())
}

/// Where a command's `ID request-id` and `BLOCK` value sit among its
/// options (indexes into the arguments).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Spots {
    pub id: Option<usize>,
    pub block: Option<usize>,
    pub mailbox: Option<usize>,
}

/// Reads the options from `start` as the commands do (`KEEP` alone, every
/// other name with its value, the last of a repeated one winning) and says
/// where `ID`'s and `BLOCK`'s values are. An `ID` without its value is a
/// syntax error, a request-id of the wrong length its own error; anything
/// else wrong is the command's to report.
pub fn spots<A: std::ops::Deref<Target = [u8]>>(args: &[A], start: usize) -> Result<Spots, Error> {
    let mut out = Spots::default();
    let mut i = start;
    while i < args.len() {
        let name = &*args[i];
        if name.eq_ignore_ascii_case(b"KEEP") {
            i += 1;
            continue;
        }
        if name.eq_ignore_ascii_case(b"ID") {
            let Some(id) = args.get(i + 1) else {
                return Err(Error::Syntax);
            };
            if !valid_id(id) {
                return Err(Error::RequestIdLength { max: MAX_ID_LEN });
            }
            out.id = Some(i + 1);
        } else if name.eq_ignore_ascii_case(b"BLOCK") {
            out.block = Some(i + 1);
        } else if name.eq_ignore_ascii_case(b"MAILBOX") {
            out.mailbox = Some(i + 1);
        }
        i += 2;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::tail_word;

    #[test]
    fn a_tail_word_is_its_bytes_low_first() {
        for n in 0..8 {
            let bytes: Vec<u8> = (0..n).map(|i| (i * 37 + 200) as u8).collect();
            let want = bytes
                .iter()
                .enumerate()
                .fold(0u64, |w, (i, b)| w | u64::from(*b) << (8 * i));
            assert_eq!(tail_word(&bytes), want, "{n} bytes");
        }
    }
}
