//! Integers as Redis reads them from a command line.

/// Parses a decimal integer the way Redis does (`string2ll`): optional
/// `-`, digits only, no spaces or `+`, no leading zeros (`0100`, `00`,
/// `-0` are refused, as `PX 0100` is), within i64.
pub fn parse_int(bytes: &[u8]) -> Option<i64> {
    if bytes == b"0" {
        return Some(0);
    }
    let (neg, digits) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    if digits.is_empty() || digits.len() > 19 || digits[0] == b'0' {
        return None;
    }
    // Accumulated towards the sign, so that i64::MIN parses too.
    let mut v: i64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        let d = i64::from(b - b'0');
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some(v)
}
