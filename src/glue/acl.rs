//! What the calling user may read, for introspection that names keys and
//! holders of other clients (`LOCK.GRAPH`, `-DEADLOCK` texts). A command's
//! own keys pass the server's ACL check before it runs; keys it only
//! reports on do not, so padlock checks them itself.

use std::os::raw::c_char;

use redis_module::{raw, Context};

/// The calling user, looked up once per command.
pub struct Reader {
    user: *mut raw::RedisModuleUser,
}

impl Reader {
    pub fn of(ctx: &Context) -> Reader {
        // SAFETY: live context; the name string is freed right after the
        // user it names was looked up (the user is freed in Drop).
        let user = unsafe {
            let name = rm!(RedisModule_GetCurrentUserName)(ctx.ctx);
            if name.is_null() {
                std::ptr::null_mut()
            } else {
                let user = rm!(RedisModule_GetModuleUserFromUserName)(name);
                rm!(RedisModule_FreeString)(std::ptr::null_mut(), name);
                user
            }
        };
        Reader { user }
    }

    /// Whether the user's key patterns let it read `key`. Without a known
    /// user nothing is shown.
    pub fn may_read(&self, key: &[u8]) -> bool {
        if self.user.is_null() {
            return false;
        }
        // SAFETY: a string without a context, freed here; a live user.
        unsafe {
            let k = rm!(RedisModule_CreateString)(
                std::ptr::null_mut(),
                key.as_ptr() as *const c_char,
                key.len(),
            );
            let ok = rm!(RedisModule_ACLCheckKeyPermissions)(
                self.user,
                k,
                raw::REDISMODULE_CMD_KEY_ACCESS as i32,
            ) == raw::REDISMODULE_OK as i32;
            rm!(RedisModule_FreeString)(std::ptr::null_mut(), k);
            ok
        }
    }

    /// A cycle `holder, key, holder, ..., holder` as this user may see it:
    /// `?` for each key it may not read and for the holder reached through
    /// it (the last holder is the caller's own, and stays).
    pub fn mask_cycle(&self, cycle: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let last = cycle.len().saturating_sub(1);
        let mut hide_next = false;
        cycle
            .into_iter()
            .enumerate()
            .map(|(i, node)| {
                let hide = if i % 2 == 1 {
                    let hidden = !self.may_read(&node);
                    hide_next = hidden;
                    hidden
                } else {
                    std::mem::take(&mut hide_next) && i != last
                };
                if hide {
                    b"?".to_vec()
                } else {
                    node
                }
            })
            .collect()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if !self.user.is_null() {
            // SAFETY: made by GetModuleUserFromUserName, freed once.
            unsafe { rm!(RedisModule_FreeModuleUser)(self.user) };
        }
    }
}
