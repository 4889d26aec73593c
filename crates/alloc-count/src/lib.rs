//! The system allocator, counting: how the tests prove a steady state allocates nothing and
//! how the benchmarks report allocations per operation. One allocator for all of them; a
//! test binary or the `tickwire` binary installs it, a library never does.
//!
//! ```
//! use tickwire_alloc_count::{CountingAllocator, thread_allocations};
//!
//! #[global_allocator]
//! static ALLOCATOR: CountingAllocator = CountingAllocator;
//!
//! let mut buffer = Vec::with_capacity(64);
//! let before = thread_allocations();
//! buffer.extend_from_slice(b"no allocation: the capacity is there");
//! assert_eq!(thread_allocations() - before, 0, "the warm buffer is reused");
//! ```
//!
//! | item | what |
//! |---|---|
//! | [`CountingAllocator`] | the global allocator to install |
//! | [`thread_allocations`] | this thread's allocations, for tests that run beside others |
//! | [`allocations`] | the whole process's allocations, for benchmarks across threads |
//! | [`live_bytes`] | heap bytes held by the whole process now, for memory per connection |
//! | [`is_active`] | whether it is installed, so a report never shows a wrong zero |

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicU64, Ordering};

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    // Const-initialized and without a destructor: reading it never allocates and works
    // while the thread is being torn down.
    static THREAD_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting every allocation and reallocation (process-wide and per
/// thread) and the heap bytes held.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingAllocator;

fn count(grown: isize) {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    LIVE_BYTES.fetch_add(grown, Ordering::Relaxed);
    let _ = THREAD_ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every call forwards to `System` with the caller's arguments unchanged; counting
// touches only atomics and a const thread-local `Cell`, none of which allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: forwarded; the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: forwarded; the caller upholds `GlobalAlloc::alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as isize - layout.size() as isize);
        // SAFETY: forwarded; the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded; the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Allocations (including reallocations) by the whole process since it started.
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Allocations (including reallocations) by the calling thread since it started: what a
/// test measures while other tests allocate on their own threads.
pub fn thread_allocations() -> u64 {
    THREAD_ALLOCATIONS.with(Cell::get)
}

/// Heap bytes the whole process holds now (allocated and not yet freed since it started).
pub fn live_bytes() -> isize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

/// Whether [`CountingAllocator`] is this process's global allocator (code linked into a
/// binary that did not install it, a divan bench, sees false).
pub fn is_active() -> bool {
    let before = allocations();
    drop(std::hint::black_box(Box::new(0u64)));
    allocations() > before
}
