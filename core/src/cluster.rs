//! Where a key's hash slot lives, read from `CLUSTER NODES` text.
//!
//! A blocked waiter is served from the module timer, not from a command
//! Redis routed, so Redis' own slot checks never see the grant. While a
//! slot migrates, the timer must not create a key the migration already
//! moved away (two nodes would then hold the lock, and the migration could
//! not finish); once the slot has moved, the waiters belong to its new
//! owner. This module answers "may this node create the key, and if not,
//! where does the client go" as Redis itself would for a command.

/// The hash slot of a key, with Redis' `{hash tag}` rule.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16(tagged) & 0x3FFF
}

/// Whether `key`'s slot is in one of `ranges` (inclusive slot ranges, as a
/// migration names them).
pub fn in_ranges(ranges: &[(u16, u16)], key: &[u8]) -> bool {
    let slot = key_slot(key);
    ranges.iter().any(|&(a, b)| (a..=b).contains(&slot))
}

/// CRC-16/XMODEM (polynomial 0x1021, initial value 0), as Redis Cluster uses.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Where a slot is served, as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Served here, and not moving.
    Mine,
    /// Served here, moving to the node at this address.
    Migrating(String),
    /// Moving here from another node.
    Importing,
    /// Served by the node at this address.
    Elsewhere(String),
    /// Served by no node.
    Unserved,
}

impl Route {
    /// The reply a client gets for a key that does not exist here, when
    /// this node may not create it; None when it may.
    pub fn redirect(&self, slot: u16) -> Option<String> {
        match self {
            Route::Mine | Route::Importing => None,
            Route::Migrating(addr) => Some(format!("ASK {slot} {addr}")),
            Route::Elsewhere(addr) => Some(format!("MOVED {slot} {addr}")),
            Route::Unserved => Some("CLUSTERDOWN Hash slot not served".to_owned()),
        }
    }
}

/// One line of `CLUSTER NODES`.
struct Node<'a> {
    id: &'a str,
    addr: &'a str,
    myself: bool,
    slots: Vec<&'a str>,
}

fn parse_line(line: &str) -> Option<Node<'_>> {
    let mut fields = line.split_ascii_whitespace();
    let id = fields.next()?;
    // ip:port@cport[,hostname]: clients are sent to ip:port.
    let addr = fields.next()?.split(['@', ',']).next()?;
    let flags = fields.next()?;
    // master, ping-sent, pong-recv, config-epoch, link-state
    let slots = fields.skip(5).collect();
    Some(Node {
        id,
        addr,
        myself: flags.split(',').any(|f| f == "myself"),
        slots,
    })
}

/// Whether a slot entry (`5`, `0-5460`) covers `slot`.
fn covers(entry: &str, slot: u16) -> bool {
    let (lo, hi) = entry.split_once('-').unwrap_or((entry, entry));
    match (lo.parse::<u16>(), hi.parse::<u16>()) {
        (Ok(lo), Ok(hi)) => lo <= slot && slot <= hi,
        _ => false,
    }
}

/// The route of `slot`, from the text of `CLUSTER NODES`; None when the
/// text has no line for this node (then nothing is known).
pub fn route(nodes: &str, slot: u16) -> Option<Route> {
    let nodes: Vec<Node> = nodes.lines().filter_map(parse_line).collect();
    let me = nodes.iter().find(|n| n.myself)?;
    let mut migrating_to = None;
    let mut importing = false;
    for entry in &me.slots {
        // `[slot->-node-id]` migrating, `[slot-<-node-id]` importing.
        let Some(inner) = entry.strip_prefix('[').and_then(|e| e.strip_suffix(']')) else {
            continue;
        };
        if let Some((s, to)) = inner.split_once("->-") {
            if s.parse() == Ok(slot) {
                migrating_to = Some(to);
            }
        } else if let Some((s, _)) = inner.split_once("-<-") {
            importing |= s.parse() == Ok(slot);
        }
    }
    let owner = nodes.iter().find(|n| {
        n.slots
            .iter()
            .any(|e| !e.starts_with('[') && covers(e, slot))
    });
    let addr_of = |id: &str| nodes.iter().find(|n| n.id == id).map(|n| n.addr.to_owned());
    Some(match owner {
        Some(o) if o.myself => match migrating_to.and_then(addr_of) {
            Some(addr) => Route::Migrating(addr),
            None => Route::Mine,
        },
        _ if importing => Route::Importing,
        Some(o) => Route::Elsewhere(o.addr.to_owned()),
        None => Route::Unserved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_ranges_reads_the_tag_and_both_ends() {
        let k = b"{user1000}.following";
        let s = key_slot(k);
        assert!(in_ranges(&[(s, s)], k));
        assert!(in_ranges(&[(0, 1), (s.saturating_sub(3), s)], k));
        assert!(!in_ranges(&[(s + 1, 16383)], k));
        assert!(!in_ranges(&[], k));
    }

    #[test]
    fn slots_match_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b""), 0);
    }

    const A: &str = "aaaa";
    const B: &str = "bbbb";

    fn nodes(a_slots: &str, b_slots: &str, me_a: bool) -> String {
        let (fa, fb) = if me_a {
            ("myself,master", "master")
        } else {
            ("master", "myself,master")
        };
        format!(
            "{A} 127.0.0.1:7000@17000 {fa} - 0 0 1 connected {a_slots}\n\
             {B} 127.0.0.1:7001@17001,host-b {fb} - 0 0 2 connected {b_slots}\n"
        )
    }

    #[test]
    fn routes_follow_a_migration() {
        let before = nodes("0-16383", "", true);
        assert_eq!(route(&before, 5), Some(Route::Mine));
        let moving = nodes(&format!("0-16383 [5->-{B}]"), &format!("[5-<-{A}]"), true);
        assert_eq!(
            route(&moving, 5),
            Some(Route::Migrating("127.0.0.1:7001".into()))
        );
        assert_eq!(route(&moving, 6), Some(Route::Mine));
        let target = nodes("0-16383", &format!("[5-<-{A}]"), false);
        assert_eq!(route(&target, 5), Some(Route::Importing));
        assert_eq!(
            route(&target, 6),
            Some(Route::Elsewhere("127.0.0.1:7000".into()))
        );
        let after = nodes("0-4 6-16383", "5", true);
        assert_eq!(
            route(&after, 5),
            Some(Route::Elsewhere("127.0.0.1:7001".into()))
        );
        let gone = nodes("0-4 6-16383", "", true);
        assert_eq!(route(&gone, 5), Some(Route::Unserved));
        assert_eq!(route("garbage\n", 5), None);
    }

    #[test]
    fn redirects_read_like_redis() {
        assert_eq!(Route::Mine.redirect(5), None);
        assert_eq!(Route::Importing.redirect(5), None);
        assert_eq!(
            Route::Migrating("h:1".into()).redirect(5).as_deref(),
            Some("ASK 5 h:1")
        );
        assert_eq!(
            Route::Elsewhere("h:1".into()).redirect(5).as_deref(),
            Some("MOVED 5 h:1")
        );
        assert!(Route::Unserved
            .redirect(5)
            .unwrap()
            .starts_with("CLUSTERDOWN"));
    }
}
