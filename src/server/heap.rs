//! The module's own heap: every Rust allocation of the module goes to the
//! system allocator, outside Redis's `used_memory`, so it is counted here
//! and shown as `ratelimit_heap_bytes` (the wait queues, the registry of
//! named policies, what a command holds while it runs).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Bytes allocated and not yet freed.
static BYTES: AtomicUsize = AtomicUsize::new(0);

/// The bytes the module holds now.
pub fn bytes() -> usize {
    BYTES.load(Relaxed)
}

/// Counts on Redis's main thread, where the module runs: a load and a
/// store, as the other statistics (a locked add costs more on every
/// allocation). Another thread's allocation may be miscounted, never
/// misallocated.
fn add(n: usize) {
    BYTES.store(BYTES.load(Relaxed).wrapping_add(n), Relaxed);
    #[cfg(test)]
    on_thread(n, true);
}

fn sub(n: usize) {
    BYTES.store(BYTES.load(Relaxed).wrapping_sub(n), Relaxed);
    #[cfg(test)]
    on_thread(n, false);
}

#[cfg(test)]
thread_local! {
    /// The test thread's own bytes (tests run side by side: the shared
    /// count moves with every test).
    static THREAD_BYTES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
fn on_thread(n: usize, added: bool) {
    // A thread being torn down has no count: its frees are not counted.
    let _ = THREAD_BYTES.try_with(|b| {
        let now = if added {
            b.get().wrapping_add(n)
        } else {
            b.get().wrapping_sub(n)
        };
        b.set(now);
    });
}

/// The bytes the calling thread allocated and has not freed (what another
/// thread frees of them is taken from that thread's count).
#[cfg(test)]
pub fn thread_bytes() -> usize {
    THREAD_BYTES.try_with(std::cell::Cell::get).unwrap_or(0)
}

/// The system allocator, counted.
pub struct Counted;

// SAFETY: every call is forwarded to `System` unchanged; only a counter
// is updated beside it.
unsafe impl GlobalAlloc for Counted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded from the caller.
        unsafe { System.dealloc(ptr, layout) };
        sub(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            sub(layout.size());
            add(new_size);
        }
        p
    }
}
