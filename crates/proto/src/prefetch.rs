//! A cache hint for drivers that hand a batch of datagrams to many endpoints: ask for every
//! endpoint's state first, then take the datagrams in. Taken one at a time, each
//! endpoint's state is a chain of cache misses the processor waits out in turn (most of a
//! load bot's receive time, a thousand clients to a core); asked for together, the loads
//! overlap.

/// Cache lines asked for at most per call: an endpoint's hot state is its first few
/// hundred bytes, and each line asked for takes one of the core's few slots for loads in
/// flight.
pub const MAX_LINES: usize = 12;

const LINE: usize = 64;

/// Asks the processor to start loading `value` (its first [`MAX_LINES`] cache lines) into
/// its cache, without waiting. A hint: it reads nothing and changes nothing, and on other
/// processors than x86-64 it does nothing at all.
#[inline]
pub fn prefetch<T: ?Sized>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start = std::ptr::from_ref(value).cast::<i8>();
        let len = std::mem::size_of_val(value).min(MAX_LINES * LINE);
        for offset in (0..len).step_by(LINE) {
            // SAFETY: SSE is part of x86-64's baseline, and a prefetch never dereferences
            // its address (any address is allowed; these are inside `value`).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
