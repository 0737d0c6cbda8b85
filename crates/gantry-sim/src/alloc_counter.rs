//! A global allocator that counts allocations and the bytes they ask for, so benchmarks
//! can report both per pod. It forwards to the system allocator; counting is two relaxed
//! atomic adds on the calling thread's own shard of the counters: one pair shared by all
//! threads had every allocation of two busy threads (a trace's reading thread and the
//! replay, two compared arms) wait for the other core's cache line, and made reading a
//! trace on two threads slower than on one. The `gantry` binary and the budget test
//! (`tests/budgets.rs`) install it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Shards of the counters: threads beyond this many share one.
const SHARDS: usize = 16;

/// One thread's counters, on cache lines of their own.
#[repr(align(128))]
struct Shard {
    allocations: AtomicU64,
    bytes: AtomicU64,
}

static COUNTS: [Shard; SHARDS] = [const {
    Shard {
        allocations: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
    }
}; SHARDS];

/// The shard the next thread to allocate takes.
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's shard, taken at its first allocation (`SHARDS`: none yet). A
    /// constant without a destructor: reading it never allocates.
    static SHARD: Cell<usize> = const { Cell::new(SHARDS) };
}

fn count(bytes: usize) {
    let shard = SHARD.with(|shard| {
        if shard.get() == SHARDS {
            shard.set(NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS);
        }
        shard.get()
    });
    let shard = &COUNTS[shard];
    shard.allocations.fetch_add(1, Ordering::Relaxed);
    shard.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
}

pub struct CountingAllocator;

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A reallocation asks for its new size (what a move to a new block would cost).
        count(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Allocations (including reallocations) since the process started.
pub fn allocations() -> u64 {
    COUNTS
        .iter()
        .map(|s| s.allocations.load(Ordering::Relaxed))
        .sum()
}

/// Bytes asked for by allocations (including reallocations) since the process started.
pub fn bytes_allocated() -> u64 {
    COUNTS.iter().map(|s| s.bytes.load(Ordering::Relaxed)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Allocations on every thread are counted, each thread on its own shard.
    #[test]
    fn allocations_on_every_thread_are_counted() {
        let (before, bytes_before) = (allocations(), bytes_allocated());
        let allocate = || {
            let layout = Layout::from_size_align(24, 8).unwrap();
            // SAFETY: a valid layout, and the block is freed with it.
            unsafe { CountingAllocator.dealloc(CountingAllocator.alloc(layout), layout) };
            SHARD.with(Cell::get)
        };
        let here = allocate();
        let there = std::thread::spawn(allocate).join().unwrap();
        assert_ne!(here, there);
        // Other tests may allocate through it too: at least these two.
        assert!(allocations() >= before + 2);
        assert!(bytes_allocated() >= bytes_before + 48);
    }
}
