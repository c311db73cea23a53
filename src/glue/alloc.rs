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

#[cfg(not(test))]
unsafe fn raw_alloc(size: usize) -> *mut u8 {
    match redis_module::raw::RedisModule_Alloc {
        Some(f) => f(size).cast(),
        None => std::process::abort(),
    }
}

#[cfg(not(test))]
unsafe fn raw_free(ptr: *mut u8) {
    match redis_module::raw::RedisModule_Free {
        Some(f) => f(ptr.cast()),
        None => std::process::abort(),
    }
}

#[cfg(test)]
unsafe fn raw_alloc(size: usize) -> *mut u8 {
    System.alloc(Layout::from_size_align_unchecked(size.max(1), NATIVE_ALIGN))
}

#[cfg(test)]
unsafe fn raw_free(ptr: *mut u8) {
    // Sizes are not needed by the system allocator on this platform's
    // `free`, but Layout must be valid: use the smallest.
    System.dealloc(ptr, Layout::from_size_align_unchecked(1, NATIVE_ALIGN))
}

unsafe impl GlobalAlloc for PadlockAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= NATIVE_ALIGN {
            return raw_alloc(layout.size().max(1));
        }
        // Room for the alignment slack and the stored original pointer.
        let total = layout.size() + layout.align() + std::mem::size_of::<usize>();
        let base = raw_alloc(total);
        if base.is_null() {
            return base;
        }
        let start = base as usize + std::mem::size_of::<usize>();
        let aligned = (start + layout.align() - 1) & !(layout.align() - 1);
        *((aligned - std::mem::size_of::<usize>()) as *mut usize) = base as usize;
        aligned as *mut u8
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.align() <= NATIVE_ALIGN {
            raw_free(ptr);
        } else {
            let base = *((ptr as usize - std::mem::size_of::<usize>()) as *const usize);
            raw_free(base as *mut u8);
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
