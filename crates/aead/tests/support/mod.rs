//! What the aead tests share, the crate's unit tests included (`src/lib.rs` includes this
//! module by path): which backends to run, RFC 8439's texts, and the inputs of the length
//! sweep.

// Each test binary uses a part of it.
#![allow(dead_code)]

pub(crate) mod backends;
pub(crate) mod rfc8439;
pub(crate) mod sweep;
