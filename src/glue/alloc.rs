//! The global allocator: Redis' allocator in the server (so `INFO memory`
//! and `maxmemory` see padlock's memory), the system one under `cargo test`.
//!
//! `RedisModule_Alloc` only promises 16-byte alignment. On servers built with
//! libc malloc an over-aligned Rust allocation would come back misaligned, so
//! larger alignments over-allocate and align by hand, keeping the original
//! pointer just before the aligned block.

#[cfg(test)]
use std::alloc::System;
use std::alloc::{GlobalAlloc, Layout};

pub struct PadlockAlloc;

const NATIVE_ALIGN: usize = 16;

/// # Safety
/// As `GlobalAlloc::alloc`: the caller frees the block with `raw_free`.
#[cfg(not(test))]
unsafe fn raw_alloc(size: usize) -> *mut u8 {
    // SAFETY: the API table is written once at load, before any Rust code
    // of the module allocates; Redis' allocator returns 16-byte aligned
    // blocks or null.
    unsafe {
        match redis_module::raw::RedisModule_Alloc {
            Some(f) => f(size).cast(),
            None => std::process::abort(),
        }
    }
}

/// # Safety
/// `ptr` came from `raw_alloc` and is freed once.
#[cfg(not(test))]
unsafe fn raw_free(ptr: *mut u8) {
    // SAFETY: as above; the block is Redis' own.
    unsafe {
        match redis_module::raw::RedisModule_Free {
            Some(f) => f(ptr.cast()),
            None => std::process::abort(),
        }
    }
}

/// # Safety
/// As `GlobalAlloc::alloc`.
#[cfg(test)]
unsafe fn raw_alloc(size: usize) -> *mut u8 {
    // SAFETY: a non-zero size and a power-of-two alignment.
    unsafe { System.alloc(Layout::from_size_align_unchecked(size.max(1), NATIVE_ALIGN)) }
}

/// # Safety
/// `ptr` came from `raw_alloc` and is freed once.
#[cfg(test)]
unsafe fn raw_free(ptr: *mut u8) {
    // SAFETY: sizes are not needed by the system allocator on this
    // platform's `free`, but Layout must be valid: use the smallest.
    unsafe { System.dealloc(ptr, Layout::from_size_align_unchecked(1, NATIVE_ALIGN)) }
}

unsafe impl GlobalAlloc for PadlockAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= NATIVE_ALIGN {
            // SAFETY: Redis' blocks are 16-byte aligned.
            return unsafe { raw_alloc(layout.size().max(1)) };
        }
        // Room for the alignment slack and the stored original pointer.
        let total = layout.size() + layout.align() + std::mem::size_of::<usize>();
        // SAFETY: freed by `dealloc` through the pointer stored below.
        let base = unsafe { raw_alloc(total) };
        if base.is_null() {
            return base;
        }
        let start = base as usize + std::mem::size_of::<usize>();
        let aligned = (start + layout.align() - 1) & !(layout.align() - 1);
        // SAFETY: `aligned - size_of::<usize>()` lies inside the block, after
        // `base` (start is base + size_of::<usize>()), and is usize-aligned
        // (aligned is a multiple of an alignment above 16).
        unsafe { *((aligned - std::mem::size_of::<usize>()) as *mut usize) = base as usize };
        aligned as *mut u8
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.align() <= NATIVE_ALIGN {
            // SAFETY: allocated by `alloc` above with the same layout.
            unsafe { raw_free(ptr) };
        } else {
            // SAFETY: `alloc` stored the block's start just before `ptr`.
            unsafe {
                let base = *((ptr as usize - std::mem::size_of::<usize>()) as *const usize);
                raw_free(base as *mut u8);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_aligned_allocations_are_aligned() {
        for align in [32usize, 64, 4096] {
            let layout = Layout::from_size_align(100, align).unwrap();
            unsafe {
                let p = PadlockAlloc.alloc(layout);
                assert_eq!(p as usize % align, 0);
                p.write_bytes(7, 100);
                PadlockAlloc.dealloc(p, layout);
            }
        }
    }
}
