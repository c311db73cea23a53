//! The hash maps of padlock's state. Their keys come from clients (key
//! names, holders, request-ids), so the hash is seeded per process (a
//! client cannot prepare names that collide), and cheaper than std's
//! SipHash: every command that queues, binds or remembers a request hashes
//! a few of them.

pub type Map<K, V> = foldhash::HashMap<K, V>;
pub type Set<T> = foldhash::HashSet<T>;
