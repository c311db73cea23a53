//! The module's settings: each name, default and range in one place, and
//! the check of load-time arguments. A misspelt name or a value `CONFIG SET`
//! would refuse must stop the load, not leave a setting silently at its
//! default (`restart-grace-m auto` once loaded with the grace off).

use super::bounds::MAX_HOLDER_LEN;
use super::grace::Grace;

/// A numeric setting.
#[derive(Debug, Clone, Copy)]
pub struct Int {
    pub name: &'static str,
    pub default: i64,
    pub min: i64,
    pub max: i64,
}

/// Largest ttl-ms / timeout-ms accepted; the setting itself up to about 34
/// years.
pub const MAX_TTL_MS: Int = Int {
    name: "max-ttl-ms",
    default: 86_400_000,
    min: 1,
    max: 1 << 40,
};
pub const MAX_HOLDER_LEN_SETTING: Int = Int {
    name: "max-holder-len",
    default: 512,
    min: 1,
    max: MAX_HOLDER_LEN as i64,
};
/// Most clients blocked on one key, and on the whole server: a wait past
/// either is refused with an error instead of growing without bound.
pub const MAX_WAITERS_PER_KEY: Int = Int {
    name: "max-waiters-per-key",
    default: 10_000,
    min: 1,
    max: 100_000_000,
};
pub const MAX_WAITERS: Int = Int {
    name: "max-waiters",
    default: 100_000,
    min: 1,
    max: 100_000_000,
};

/// Edges declared with `LOCK.WAITFOR` at most.
pub const MAX_WAIT_EDGES: Int = Int {
    name: "max-wait-edges",
    default: 100_000,
    min: 1,
    max: 100_000_000,
};
/// A `KEEP` lease whose connection sent nothing for this long is no longer
/// kept (0 = off).
pub const KEEP_MAX_IDLE_MS: Int = Int {
    name: "keep-max-idle-ms",
    default: 0,
    min: 0,
    max: 1 << 40,
};
/// The `KEEP` ttl floor: a `KEEP` ttl below three times this is refused.
/// (Bound leases cost no writes; the name is from when they were renewed.)
pub const KEEP_MIN_INTERVAL_MS: Int = Int {
    name: "keep-min-interval-ms",
    default: 100,
    min: 1,
    max: 60_000,
};

/// How long a freed key's request-ids are remembered.
pub const ID_MEMORY_MS: Int = Int {
    name: "id-memory-ms",
    default: 60_000,
    min: 1,
    max: 1 << 40,
};
/// Request-ids remembered per holder per key.
pub const MAX_IDS_PER_HOLDER: Int = Int {
    name: "max-ids-per-holder",
    default: 16,
    min: 1,
    max: 1024,
};
/// Request-ids of freed keys remembered at most.
pub const MAX_REMEMBERED_IDS: Int = Int {
    name: "max-remembered-ids",
    default: 100_000,
    min: 0,
    max: 100_000_000,
};

/// The expiry a mailbox gets at each append, so an abandoned one goes.
pub const MAILBOX_TTL_MS: Int = Int {
    name: "mailbox-ttl-ms",
    default: 60_000,
    min: 1,
    max: 1 << 40,
};

pub const INTS: [Int; 11] = [
    MAX_TTL_MS,
    MAX_HOLDER_LEN_SETTING,
    MAX_WAITERS_PER_KEY,
    MAX_WAITERS,
    MAX_WAIT_EDGES,
    KEEP_MAX_IDLE_MS,
    KEEP_MIN_INTERVAL_MS,
    ID_MEMORY_MS,
    MAX_IDS_PER_HOLDER,
    MAX_REMEMBERED_IDS,
    MAILBOX_TTL_MS,
];

/// `restart-grace-ms`: a number of ms or `auto`.
pub const RESTART_GRACE_MS: &str = "restart-grace-ms";
pub const RESTART_GRACE_DEFAULT: &str = "0";

/// `eviction`: what padlock does while `maxmemory-policy` can evict its
/// keys.
pub const EVICTION: &str = "eviction";
pub const EVICTION_DEFAULT: &str = "warn";

/// `eviction` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    Warn,
    Refuse,
}

impl Eviction {
    pub fn parse(text: &[u8]) -> Option<Eviction> {
        if text.eq_ignore_ascii_case(b"warn") {
            Some(Eviction::Warn)
        } else if text.eq_ignore_ascii_case(b"refuse") {
            Some(Eviction::Refuse)
        } else {
            None
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Eviction::Warn => "warn",
            Eviction::Refuse => "refuse",
        }
    }
}

/// Checks `name value ...` load arguments: every name known (exactly as
/// written: the server looks them up that way), none twice, every value
/// one `CONFIG SET` would take. The error names what is wrong.
pub fn check_load_args(args: &[&[u8]]) -> Result<(), String> {
    let show = |b: &[u8]| super::error::escape(b);
    if args.len() % 2 == 1 {
        return Err(format!(
            "load arguments come as name value pairs; '{}' has no value",
            show(args[args.len() - 1])
        ));
    }
    let mut seen: Vec<&[u8]> = Vec::new();
    for pair in args.chunks(2) {
        let (name, value) = (pair[0], pair[1]);
        if seen.contains(&name) {
            return Err(format!("load argument '{}' given twice", show(name)));
        }
        seen.push(name);
        if let Some(int) = INTS.iter().find(|i| i.name.as_bytes() == name) {
            match super::number::parse_int(value) {
                Some(v) if (int.min..=int.max).contains(&v) => continue,
                _ => {
                    return Err(format!(
                        "{} must be an integer from {} to {}, not '{}'",
                        int.name,
                        int.min,
                        int.max,
                        show(value)
                    ))
                }
            }
        }
        let ok = match name {
            n if n == RESTART_GRACE_MS.as_bytes() => Grace::parse(value, MAX_TTL_MS.max).is_ok(),
            n if n == EVICTION.as_bytes() => Eviction::parse(value).is_some(),
            _ => {
                let known: Vec<&str> = INTS
                    .iter()
                    .map(|i| i.name)
                    .chain([RESTART_GRACE_MS, EVICTION])
                    .collect();
                return Err(format!(
                    "unknown load argument '{}' (known: {})",
                    show(name),
                    known.join(", ")
                ));
            }
        };
        if !ok {
            return Err(format!(
                "'{}' is not a valid value for {}",
                show(value),
                show(name)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(s: &str) -> Result<(), String> {
        let args: Vec<&[u8]> = s.split_whitespace().map(str::as_bytes).collect();
        check_load_args(&args)
    }

    #[test]
    fn good_arguments_pass() {
        assert!(check("").is_ok());
        assert!(check("max-ttl-ms 5000 restart-grace-ms auto eviction refuse").is_ok());
        assert!(check("max-holder-len 65536 max-waiters 1").is_ok());
        assert!(check("max-wait-edges 10 keep-max-idle-ms 0 keep-min-interval-ms 50").is_ok());
    }

    #[test]
    fn typos_and_bad_values_are_named() {
        let e = check("restart-grace-m auto").unwrap_err();
        assert!(e.contains("unknown load argument 'restart-grace-m'"), "{e}");
        let e = check("max-holder-len 0").unwrap_err();
        assert!(
            e.contains("max-holder-len must be an integer from 1 to 65536"),
            "{e}"
        );
        assert!(check("max-ttl-ms 0100").is_err(), "leading zero");
        assert!(check("max-ttl-ms +5").is_err());
        assert!(check("eviction maybe").unwrap_err().contains("eviction"));
        assert!(check("restart-grace-ms soon").is_err());
        assert!(check("max-ttl-ms").unwrap_err().contains("has no value"));
        assert!(check("max-ttl-ms 5 max-ttl-ms 6")
            .unwrap_err()
            .contains("twice"));
        assert!(check("MAX-TTL-MS 5").is_err(), "names are exact");
    }
}
