//! Bit-packed, bounded encoding for tickwire's messages and snapshots.
//!
//! Every field is declared with the bounds it really has (a health in `0..=1000` takes 10
//! bits, a name of at most 32 bytes a 6-bit length), so messages are as small as their
//! information, and a decoder refuses anything outside those bounds with an error that names
//! the field. Nothing here does I/O or allocates on the encode path; decoding into an
//! existing value ([`Decode::decode_in_place`]) reuses its strings and vectors.
//!
//! ```
//! use tickwire_wire::{Decode, Encode, decode_exact, encode_to_slice};
//!
//! #[derive(Debug, PartialEq, Encode, Decode)]
//! struct Entity {
//!     #[wire(max_len = 32)]
//!     name: String,
//!     #[wire(min = 0, max = 1000)]
//!     health: [u16; 2],
//!     dead: bool,
//! }
//!
//! let casey = Entity { name: "Casey".into(), health: [100, 100], dead: false };
//! let mut buf = [0u8; 64];
//! let len = encode_to_slice(&casey, &mut buf)?;
//! assert_eq!(len, 9); // 6 + 40 + 2 × 10 + 1 = 67 bits
//! assert_eq!(decode_exact::<Entity>(&buf[..len])?, casey);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | type | role |
//! |---|---|
//! | [`BitWriter`], [`BitReader`] | write and read bits through a 64-bit scratch register |
//! | [`BitWrite`] | every encoding, shared by the writer and the [`BitCounter`] |
//! | [`Encode`], [`Decode`] | a type's natural encoding; derivable |
//! | [`Codec`] | a field's bounded encoding, chosen by `#[wire(...)]` ([`codec`]) |
//! | [`Quantize`] | a float grid: `min`, `max`, `resolution` |
//! | [`EncodeError`], [`DecodeError`] | what went wrong, and in which field |
//!
//! The exact bit layout of every encoding is specified in `docs/PROTOCOL.md`.

#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

// Lets derived code, which names `::tickwire_wire`, compile inside this crate's own tests.
extern crate self as tickwire_wire;

pub mod codec;
mod error;
#[cfg(feature = "fixtures")]
pub mod fixtures;
mod quantize;
mod reader;
pub mod replicate;
pub mod schema;
mod writer;

pub use codec::{Codec, Decode, Encode};
pub use error::{
    DecodeError, DecodeErrorInfo, DecodeErrorKind, EncodeError, EncodeErrorInfo, EncodeErrorKind,
    FieldPath,
};
pub use quantize::Quantize;
pub use reader::BitReader;
pub use schema::{Describe, DescribeCodec};
pub use tickwire_wire_derive::{Decode, Describe, Encode, Replicate};
pub use writer::{BitCounter, BitWrite, BitWriter, bits_for_span};

/// Encodes `value` at the start of `buf` and returns the number of bytes used.
#[inline]
pub fn encode_to_slice<T: Encode + ?Sized>(
    value: &T,
    buf: &mut [u8],
) -> Result<usize, EncodeError> {
    let mut writer = BitWriter::new(buf);
    value.encode(&mut writer)?;
    writer.finish()
}

/// Encodes `value` into a new vector of exactly its size.
pub fn encode_to_vec<T: Encode + ?Sized>(value: &T) -> Result<Vec<u8>, EncodeError> {
    let mut buf = vec![0; bit_len(value)?.div_ceil(8)];
    encode_to_slice(value, &mut buf)?;
    Ok(buf)
}

/// The number of bits `value` encodes to, measured without writing.
#[inline]
pub fn bit_len<T: Encode + ?Sized>(value: &T) -> Result<usize, EncodeError> {
    let mut counter = BitCounter::default();
    value.encode(&mut counter)?;
    Ok(counter.bits_written())
}

/// Decodes a value that must fill `bytes` exactly (only zero padding may follow it).
#[inline]
pub fn decode_exact<T: Decode>(bytes: &[u8]) -> Result<T, DecodeError> {
    let mut reader = BitReader::new(bytes);
    let value = T::decode(&mut reader)?;
    reader.finish()?;
    Ok(value)
}

/// Decodes over `value`, reusing its allocations; `bytes` must hold exactly one value.
#[inline]
pub fn decode_exact_in_place<T: Decode>(value: &mut T, bytes: &[u8]) -> Result<(), DecodeError> {
    let mut reader = BitReader::new(bytes);
    value.decode_in_place(&mut reader)?;
    reader.finish()
}
