//! Keyspace events padlock listens to.

use redis_module::{Context, NotifyEvent, RedisString};

use super::info;
use super::server::notify;
use super::types;
use super::waiting;

/// `expired` / `evicted`: a lease that ran out with its key.
pub fn on_key_event(ctx: &Context, event: NotifyEvent, _name: &str, key: &[u8]) {
    let Some(expired_event) = types::take_unlinked(key) else {
        return;
    };
    if event.contains(NotifyEvent::EXPIRED) {
        info::bump(&info::EXPIRED);
        notify(
            ctx,
            expired_event,
            &RedisString::create_from_slice(ctx.ctx, key),
        );
    }
}

/// Generic events: a lease moved by hand (`PEXPIRE`, `EXPIREAT`, ...) must
/// move the hand-off timer of the key's waiters.
pub fn on_generic_event(_ctx: &Context, _event: NotifyEvent, name: &str, key: &[u8]) {
    if name == "expire" {
        waiting::expiry_changed(key);
    }
}
