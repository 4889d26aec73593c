//! A cache hint, for code about to read memory it can name before it needs it: a driver
//! handing a batch of datagrams to many endpoints asks for every endpoint's state first
//! (one at a time, each endpoint's state is a chain of cache misses waited out in turn;
//! most of a load bot's receive time, a thousand clients to a core), the server asks for
//! each connection of a received batch and for the next connection it writes a packet
//! for, and the arena's encoder asks for a recipient's stored view before it encodes the
//! one before.

const LINE: usize = 64;

/// Asks the processor to start loading every cache line of `value` into its cache, without
/// waiting. A hint: it reads nothing and changes nothing, and on other processors than
/// x86-64 it does nothing at all.
#[inline]
pub fn prefetch<T: ?Sized>(value: &T) {
    prefetch_bytes(value, std::mem::size_of_val(value));
}

/// [`prefetch`] of the first `len` bytes of `value` only (at most its size): for a struct
/// laid out with what a path reads first.
#[inline]
pub fn prefetch_bytes<T: ?Sized>(value: &T, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start = std::ptr::from_ref(value).cast::<i8>();
        for offset in (0..len.min(std::mem::size_of_val(value))).step_by(LINE) {
            // SAFETY: SSE is part of x86-64's baseline, and a prefetch never dereferences
            // its address (any address is allowed; these are inside `value`).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (value, len);
}
