//! One open key, closed exactly once. Reads and writes padlock's value
//! types and the key's absolute expiry (there is no safe wrapper for the
//! latter in `redis-module`, and its `to_raw_parts` closes keys twice).

use redis_module::{raw, Context, RedisString};

use super::types::{self, into_raw, Stored, Value};
use crate::core::error::Error;

pub struct Key<'a> {
    ptr: *mut raw::RedisModuleKey,
    ctx: *mut raw::RedisModuleCtx,
    name: &'a RedisString,
    /// Written to: WATCH and client-side caching are told on close. (The
    /// module turns off Redis' implicit signal, which would also fire for
    /// a refused acquire that changed nothing.)
    modified: bool,
}

impl<'a> Key<'a> {
    pub fn read(ctx: &Context, name: &'a RedisString) -> Key<'a> {
        Self::open(ctx, name, raw::REDISMODULE_READ)
    }

    pub fn write(ctx: &Context, name: &'a RedisString) -> Key<'a> {
        Self::open(ctx, name, raw::REDISMODULE_READ | raw::REDISMODULE_WRITE)
    }

    fn open(ctx: &Context, name: &'a RedisString, mode: u32) -> Key<'a> {
        // SAFETY: ctx and name are live for this command; the key is closed
        // in Drop.
        let ptr = unsafe { rm!(RedisModule_OpenKey)(ctx.ctx, name.inner, mode as i32) };
        Key {
            ptr,
            ctx: ctx.ctx,
            name,
            modified: false,
        }
    }

    /// Notes a change made through `lock()` / `sem()`.
    pub fn modified(&mut self) {
        self.modified = true;
    }

    /// Whatever padlock value is here, as the waiting engine reads it:
    /// None for an empty key, `WRONGTYPE` for a value of any other type.
    pub fn stored(&self) -> Result<Option<&dyn Stored>, Error> {
        if self.ptr.is_null() {
            return Ok(None);
        }
        // SAFETY: open key; the value belongs to the type it reports.
        unsafe {
            let t = rm!(RedisModule_KeyType)(self.ptr);
            if t == raw::REDISMODULE_KEYTYPE_EMPTY as i32 {
                return Ok(None);
            }
            if t != raw::REDISMODULE_KEYTYPE_MODULE as i32 {
                return Err(Error::WrongType);
            }
            let mt = rm!(RedisModule_ModuleTypeGetType)(self.ptr);
            let value = rm!(RedisModule_ModuleTypeGetValue)(self.ptr);
            types::stored(mt, value).map(Some).ok_or(Error::WrongType)
        }
    }

    /// The value stored here: None for an empty key, `WRONGTYPE` for a
    /// value of any other type.
    pub fn value<T: Value>(&mut self) -> Result<Option<&mut T>, Error> {
        if self.ptr.is_null() {
            return Ok(None);
        }
        // SAFETY: open key; a value of type `T::TYPE` is a `Box<T>` made by
        // `types::into_raw`.
        unsafe {
            if rm!(RedisModule_KeyType)(self.ptr) == raw::REDISMODULE_KEYTYPE_EMPTY as i32 {
                return Ok(None);
            }
            if rm!(RedisModule_ModuleTypeGetType)(self.ptr) != *T::TYPE.raw_type.borrow() {
                return Err(Error::WrongType);
            }
            let p = rm!(RedisModule_ModuleTypeGetValue)(self.ptr);
            Ok((p as *mut T).as_mut())
        }
    }

    /// Stores a new value (replacing any old one, expiry included).
    /// Generic over the value type; a caller names one (`Lock`, ...).
    pub fn put<T: Value>(&mut self, value: T) {
        self.modified = true;
        let boxed = into_raw(value);
        // SAFETY: the key is open for writing; Redis owns the box from here
        // and frees it through the type's free callback. Setting a value
        // deletes the old one first, which is no removal by another hand.
        super::types::deleting_on_purpose(|| unsafe {
            rm!(RedisModule_ModuleTypeSetValue)(self.ptr, *T::TYPE.raw_type.borrow(), boxed);
        });
    }

    /// Absolute expiry in unix ms, None when the key has none.
    pub fn expire_at(&self) -> Option<i64> {
        if self.ptr.is_null() {
            return None;
        }
        // SAFETY: open key.
        let t = unsafe { rm!(RedisModule_GetAbsExpire)(self.ptr) };
        (t >= 0).then_some(t)
    }

    pub fn set_expire_at(&mut self, at_ms: i64) {
        self.modified = true;
        // SAFETY: open key holding a value.
        unsafe {
            rm!(RedisModule_SetAbsExpire)(self.ptr, at_ms);
        }
    }

    /// Whether the key is a list or absent (what a mailbox may be).
    pub fn list_or_empty(&self) -> bool {
        if self.ptr.is_null() {
            return true;
        }
        // SAFETY: open key.
        let t = unsafe { rm!(RedisModule_KeyType)(self.ptr) } as isize;
        t == raw::REDISMODULE_KEYTYPE_EMPTY || t == raw::REDISMODULE_KEYTYPE_LIST
    }

    /// Appends `element` to the list here (made if absent); false when
    /// Redis refused (another type).
    pub fn push_tail(&mut self, element: &RedisString) -> bool {
        // SAFETY: open key; Redis copies or retains the string.
        let done = unsafe {
            rm!(RedisModule_ListPush)(self.ptr, raw::REDISMODULE_LIST_TAIL as i32, element.inner)
        } == raw::REDISMODULE_OK as i32;
        self.modified |= done;
        done
    }

    pub fn delete(&mut self) {
        self.modified = true;
        super::types::deleting_on_purpose(|| {
            // SAFETY: open key.
            unsafe {
                rm!(RedisModule_DeleteKey)(self.ptr);
            }
        });
    }
}

impl Drop for Key<'_> {
    fn drop(&mut self) {
        if self.ptr.is_null() {
            return;
        }
        // SAFETY: opened in `open`, closed only here; ctx and name outlive
        // the key.
        unsafe {
            rm!(RedisModule_CloseKey)(self.ptr);
            if self.modified {
                rm!(RedisModule_SignalModifiedKey)(self.ctx, self.name.inner);
            }
        }
    }
}
