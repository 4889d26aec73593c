//! The [`Encode`]/[`Decode`] traits and the codecs that field attributes select.
//!
//! A type with one natural encoding implements [`Encode`] and [`Decode`]. A field whose
//! encoding depends on a declared bound is encoded through a [`Codec`] value instead: the
//! derive turns `#[wire(min = 0, max = 1000)]` into the constant `Range::new(0, 1000)` and
//! calls `Codec::<u16>::encode` on it. Codecs extend element-wise to arrays, `Option` and
//! (with [`MaxLen`]) `Vec`, so `#[wire(min = 0, max = 1000)] health: [u16; 2]` bounds both
//! elements.
//!
//! | attribute | codec | applies to |
//! |---|---|---|
//! | none | [`Natural`] | types implementing [`Encode`] + [`Decode`] |
//! | `min = A, max = B` | [`Range`] | integers |
//! | `bits = N` | [`Bits`] | unsigned integers |
//! | `varint` | [`Varint`] | integers (signed ones zigzag-mapped) |
//! | `quantize(min = A, max = B, resolution = R)` | [`Quantize`] | `f32` |
//! | `max_len = N` (plus an element attribute) | [`MaxLen`] | `String`, `Vec<T>` |
//!
//! Mistakes in the declaration are compile errors, not runtime surprises. A range whose `min`
//! exceeds its `max`:
//!
//! ```compile_fail
//! #[derive(tickwire_wire::Encode)]
//! struct Stat {
//!     #[wire(min = 1000, max = 0)]
//!     value: u16,
//! }
//! ```
//!
//! A string without a bound:
//!
//! ```compile_fail
//! #[derive(tickwire_wire::Encode)]
//! struct Player {
//!     name: String,
//! }
//! ```
//!
//! A float grid finer than `f32` can tell apart:
//!
//! ```compile_fail
//! #[derive(tickwire_wire::Encode)]
//! struct Position {
//!     #[wire(quantize(min = -100000.0, max = 100000.0, resolution = 0.0001))]
//!     x: f32,
//! }
//! ```
//!
//! Two element codecs for one field:
//!
//! ```compile_fail
//! #[derive(tickwire_wire::Encode)]
//! struct Score {
//!     #[wire(varint, bits = 8)]
//!     value: u32,
//! }
//! ```
//!
//! The same declarations, written correctly, compile:
//!
//! ```
//! #[derive(tickwire_wire::Encode)]
//! struct Fine {
//!     #[wire(min = 0, max = 1000)]
//!     stat: u16,
//!     #[wire(max_len = 16)]
//!     name: String,
//!     #[wire(quantize(min = -100000.0, max = 100000.0, resolution = 0.1))]
//!     x: f32,
//!     #[wire(varint)]
//!     score: u32,
//! }
//! ```

use crate::error::{DecodeError, DecodeErrorKind, EncodeError, EncodeErrorKind};
use crate::quantize::Quantize;
use crate::reader::BitReader;
use crate::writer::{BitWrite, bits_for_span};

/// A type with one natural encoding.
pub trait Encode {
    /// Writes `self` to `writer`.
    fn encode<W: BitWrite + ?Sized>(&self, writer: &mut W) -> Result<(), EncodeError>;
}

/// A type that can be read back from its encoding.
pub trait Decode: Sized {
    /// Reads a value.
    fn decode(reader: &mut BitReader<'_>) -> Result<Self, DecodeError>;

    /// Reads a value over `self`, reusing its allocations (strings, vectors) so that
    /// steady-state decoding allocates nothing. On error `self` holds a partial value.
    #[inline(always)]
    fn decode_in_place(&mut self, reader: &mut BitReader<'_>) -> Result<(), DecodeError> {
        *self = Self::decode(reader)?;
        Ok(())
    }

    /// The fewest bits any value takes; lets sequence decoders refuse a length the input
    /// cannot hold before allocating for it.
    fn min_bits() -> usize {
        0
    }
}

/// How one field is encoded: a value built from the field's attribute, applied to the
/// field's type.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot encode a `{T}`",
    note = "strings and vectors need `#[wire(max_len = N)]`; `min`/`max`, `bits` and `varint` apply to integers; `quantize(..)` to f32; other types derive Encode and Decode"
)]
pub trait Codec<T> {
    /// Writes `value`.
    fn encode<W: BitWrite + ?Sized>(&self, value: &T, writer: &mut W) -> Result<(), EncodeError>;

    /// Reads a value.
    fn decode(&self, reader: &mut BitReader<'_>) -> Result<T, DecodeError>;

    /// Reads a value over `value`, reusing its allocations.
    #[inline(always)]
    fn decode_in_place(
        &self,
        value: &mut T,
        reader: &mut BitReader<'_>,
    ) -> Result<(), DecodeError> {
        *value = self.decode(reader)?;
        Ok(())
    }

    /// The fewest bits any value takes.
    fn min_bits(&self) -> usize;
}

/// The codec of a field without attributes: the type's own [`Encode`] and [`Decode`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Natural;

impl<T: Encode + Decode> Codec<T> for Natural {
    #[inline(always)]
    fn encode<W: BitWrite + ?Sized>(&self, value: &T, writer: &mut W) -> Result<(), EncodeError> {
        value.encode(writer)
    }

    #[inline(always)]
    fn decode(&self, reader: &mut BitReader<'_>) -> Result<T, DecodeError> {
        T::decode(reader)
    }

    #[inline(always)]
    fn decode_in_place(
        &self,
        value: &mut T,
        reader: &mut BitReader<'_>,
    ) -> Result<(), DecodeError> {
        value.decode_in_place(reader)
    }

    fn min_bits(&self) -> usize {
        T::min_bits()
    }
}

/// An integer declared to lie in `min..=max`, sent as its offset from `min` in
/// `ceil(log2(max - min + 1))` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    min: i128,
    max: i128,
    bits: u32,
}

impl Range {
    /// The range `min..=max`; panics (at compile time in a `const`) unless
    /// `min <= max` and the span fits in 64 bits.
    pub const fn new(min: i128, max: i128) -> Self {
        assert!(min <= max, "range: min must not exceed max");
        assert!(
            max - min <= u64::MAX as i128,
            "range: max - min must fit in 64 bits"
        );
        Self {
            min,
            max,
            bits: bits_for_span((max - min) as u64),
        }
    }

    /// Bits each value takes.
    pub const fn bits(&self) -> u32 {
        self.bits
    }

    /// The smallest value.
    pub const fn min(&self) -> i128 {
        self.min
    }

    /// The largest value.
    pub const fn max(&self) -> i128 {
        self.max
    }
}

/// An unsigned integer sent in exactly `bits` bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bits {
    bits: u32,
}

impl Bits {
    /// Exactly `bits` bits; panics (at compile time in a `const`) unless `1 <= bits <= 64`.
    pub const fn new(bits: u32) -> Self {
        assert!(bits >= 1 && bits <= 64, "bits: count must be 1..=64");
        Self { bits }
    }

    /// Bits each value takes.
    pub const fn count(&self) -> u32 {
        self.bits
    }
}

/// An integer with no known range, sent as a varint (signed integers zigzag-mapped first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Varint;

/// A string (length in bytes) or sequence (length in elements) of at most `max_len`,
/// sent as its length in `0..=max_len` followed by its contents; `element` encodes each
/// element of a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxLen<C> {
    max_len: usize,
    element: C,
}

impl<C> MaxLen<C> {
    /// At most `max_len` bytes or elements, each element encoded with `element`.
    pub const fn new(max_len: usize, element: C) -> Self {
        Self { max_len, element }
    }

    /// The most bytes or elements.
    pub const fn max_len(&self) -> usize {
        self.max_len
    }

    /// Each element's codec.
    pub const fn element(&self) -> &C {
        &self.element
    }
}

macro_rules! natural_uint {
    ($($ty:ty),*) => {$(
        impl Encode for $ty {
            #[inline(always)]
            fn encode<W: BitWrite + ?Sized>(&self, writer: &mut W) -> Result<(), EncodeError> {
                writer.write_uint(u64::from(*self), <$ty>::BITS)
            }
        }

        impl Decode for $ty {
            #[inline(always)]
            fn decode(reader: &mut BitReader<'_>) -> Result<Self, DecodeError> {
                Ok(reader.read_uint(<$ty>::BITS)? as $ty)
            }

            fn min_bits() -> usize {
                <$ty>::BITS as usize
            }
        }
    )*};
}

macro_rules! natural_int {
    ($($ty:ty => $unsigned:ty),*) => {$(
        impl Encode for $ty {
            #[inline(always)]
            fn encode<W: BitWrite + ?Sized>(&self, writer: &mut W) -> Result<(), EncodeError> {
                writer.write_uint(u64::from(*self as $unsigned), <$ty>::BITS)
            }
        }

        impl Decode for $ty {
            #[inline(always)]
            fn decode(reader: &mut BitReader<'_>) -> Result<Self, DecodeError> {
                Ok(reader.read_uint(<$ty>::BITS)? as $unsigned as $ty)
            }

            fn min_bits() -> usize {
                <$ty>::BITS as usize
            }
        }
    )*};
}

natural_uint!(u8, u16, u32, u64);
natural_int!(i8 => u8, i16 => u16, i32 => u32, i64 => u64);

impl Encode for bool {
    #[inline(always)]
    fn encode<W: BitWrite + ?Sized>(&self, writer: &mut W) -> Result<(), EncodeError> {
        writer.write_bool(*self)
    }
}

impl Decode for bool {
    #[inline(always)]
    fn decode(reader: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        reader.read_bool()
    }

    fn min_bits() -> usize {
        1
    }
}

impl Encode for f32 {
    #[inline(always)]
    fn encode<W: BitWrite + ?Sized>(&self, writer: &mut W) -> Result<(), EncodeError> {
        writer.write_f32(*self)
    }
}

impl Decode for f32 {
    #[inline(always)]
    fn decode(reader: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        reader.read_f32()
    }

    fn min_bits() -> usize {
        32
    }
}

impl Encode for f64 {
    #[inline(always)]
    fn encode<W: BitWrite + ?Sized>(&self, writer: &mut W) -> Result<(), EncodeError> {
        writer.write_f64(*self)
    }
}

impl Decode for f64 {
    #[inline(always)]
    fn decode(reader: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        reader.read_f64()
    }

    fn min_bits() -> usize {
        64
    }
}

impl<T: Encode, const N: usize> Encode for [T; N] {
    #[inline(always)]
    fn encode<W: BitWrite + ?Sized>(&self, writer: &mut W) -> Result<(), EncodeError> {
        self.iter().try_for_each(|value| value.encode(writer))
    }
}

impl<T: Decode, const N: usize> Decode for [T; N] {
    #[inline(always)]
    fn decode(reader: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        decode_array(|| T::decode(reader))
    }

    #[inline(always)]
    fn decode_in_place(&mut self, reader: &mut BitReader<'_>) -> Result<(), DecodeError> {
        self.iter_mut()
            .try_for_each(|value| value.decode_in_place(reader))
    }

    fn min_bits() -> usize {
        N * T::min_bits()
    }
}

impl<T: Encode> Encode for Option<T> {
    #[inline(always)]
    fn encode<W: BitWrite + ?Sized>(&self, writer: &mut W) -> Result<(), EncodeError> {
        writer.write_bool(self.is_some())?;
        match self {
            Some(value) => value.encode(writer),
            None => Ok(()),
        }
    }
}

impl<T: Decode> Decode for Option<T> {
    #[inline(always)]
    fn decode(reader: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        if reader.read_bool()? {
            Ok(Some(T::decode(reader)?))
        } else {
            Ok(None)
        }
    }

    fn min_bits() -> usize {
        1
    }
}

/// Builds an array from `decode_one`, stopping at the first error (arrays cannot be
/// built element by element without `unsafe`, so elements pass through `Option`).
#[inline(always)]
fn decode_array<T, const N: usize>(
    mut decode_one: impl FnMut() -> Result<T, DecodeError>,
) -> Result<[T; N], DecodeError> {
    let mut failure = None;
    let values: [Option<T>; N] = std::array::from_fn(|_| match failure {
        Some(_) => None,
        None => decode_one().map_err(|error| failure = Some(error)).ok(),
    });
    match failure {
        Some(error) => Err(error),
        // Every element decoded when nothing failed.
        None => Ok(values.map(|value| value.unwrap_or_else(|| unreachable!()))),
    }
}

/// Gives a codec its `[T; N]` and `Option<T>` forms (`Natural` gets them through
/// `Encode`/`Decode` instead, which would otherwise overlap).
macro_rules! containers {
    ($codec:ty $(, $param:ident)?) => {
        impl<T, $($param,)? const N: usize> Codec<[T; N]> for $codec
        where
            $codec: Codec<T>,
        {
            #[inline(always)]
            fn encode<W: BitWrite + ?Sized>(&self, values: &[T; N], writer: &mut W) -> Result<(), EncodeError> {
                for value in values {
                    Codec::<T>::encode(self, value, writer)?;
                }
                Ok(())
            }

            #[inline(always)]
            fn decode(&self, reader: &mut BitReader<'_>) -> Result<[T; N], DecodeError> {
                decode_array(|| Codec::<T>::decode(self, reader))
            }

            #[inline(always)]
            fn decode_in_place(&self, values: &mut [T; N], reader: &mut BitReader<'_>) -> Result<(), DecodeError> {
                for value in values {
                    Codec::<T>::decode_in_place(self, value, reader)?;
                }
                Ok(())
            }

            fn min_bits(&self) -> usize {
                N * Codec::<T>::min_bits(self)
            }
        }

        impl<T, $($param)?> Codec<Option<T>> for $codec
        where
            $codec: Codec<T>,
        {
            #[inline(always)]
            fn encode<W: BitWrite + ?Sized>(&self, value: &Option<T>, writer: &mut W) -> Result<(), EncodeError> {
                writer.write_bool(value.is_some())?;
                match value {
                    Some(value) => Codec::<T>::encode(self, value, writer),
                    None => Ok(()),
                }
            }

            #[inline(always)]
            fn decode(&self, reader: &mut BitReader<'_>) -> Result<Option<T>, DecodeError> {
                if reader.read_bool()? {
                    Ok(Some(Codec::<T>::decode(self, reader)?))
                } else {
                    Ok(None)
                }
            }

            fn min_bits(&self) -> usize {
                1
            }
        }
    };
}

containers!(Range);
containers!(Bits);
containers!(Varint);
containers!(Quantize);
containers!(MaxLen<C>, C);

macro_rules! ranged_int {
    ($($ty:ty),*) => {$(
        impl Codec<$ty> for Range {
            #[inline(always)]
            fn encode<W: BitWrite + ?Sized>(&self, value: &$ty, writer: &mut W) -> Result<(), EncodeError> {
                let value = i128::from(*value);
                if value < self.min || value > self.max {
                    return Err(EncodeErrorKind::OutOfRange { value, min: self.min, max: self.max }.into());
                }
                writer.write_uint((value - self.min) as u64, self.bits)
            }

            #[inline(always)]
            fn decode(&self, reader: &mut BitReader<'_>) -> Result<$ty, DecodeError> {
                let value = reader.read_range_in_bits(self.min, self.max, self.bits)?;
                // A range wider than the field's type can produce values the type cannot hold.
                <$ty>::try_from(value).map_err(|_| {
                    DecodeErrorKind::OutOfRange {
                        value,
                        min: i128::from(<$ty>::MIN),
                        max: i128::from(<$ty>::MAX),
                    }
                    .into()
                })
            }

            fn min_bits(&self) -> usize {
                self.bits as usize
            }
        }
    )*};
}

ranged_int!(u8, u16, u32, u64, i8, i16, i32, i64);

macro_rules! bits_uint {
    ($($ty:ty),*) => {$(
        impl Codec<$ty> for Bits {
            #[inline(always)]
            fn encode<W: BitWrite + ?Sized>(&self, value: &$ty, writer: &mut W) -> Result<(), EncodeError> {
                writer.write_uint(u64::from(*value), self.bits)
            }

            #[inline(always)]
            fn decode(&self, reader: &mut BitReader<'_>) -> Result<$ty, DecodeError> {
                let value = reader.read_uint(self.bits)?;
                <$ty>::try_from(value).map_err(|_| {
                    DecodeErrorKind::OutOfRange {
                        value: i128::from(value),
                        min: 0,
                        max: i128::from(<$ty>::MAX),
                    }
                    .into()
                })
            }

            fn min_bits(&self) -> usize {
                self.bits as usize
            }
        }
    )*};
}

bits_uint!(u8, u16, u32, u64);

macro_rules! varint_uint {
    ($($ty:ty),*) => {$(
        impl Codec<$ty> for Varint {
            #[inline(always)]
            fn encode<W: BitWrite + ?Sized>(&self, value: &$ty, writer: &mut W) -> Result<(), EncodeError> {
                writer.write_varint(u64::from(*value))
            }

            #[inline(always)]
            fn decode(&self, reader: &mut BitReader<'_>) -> Result<$ty, DecodeError> {
                let value = reader.read_varint()?;
                <$ty>::try_from(value).map_err(|_| {
                    DecodeErrorKind::OutOfRange {
                        value: i128::from(value),
                        min: 0,
                        max: i128::from(<$ty>::MAX),
                    }
                    .into()
                })
            }

            fn min_bits(&self) -> usize {
                8
            }
        }
    )*};
}

macro_rules! varint_int {
    ($($ty:ty),*) => {$(
        impl Codec<$ty> for Varint {
            #[inline(always)]
            fn encode<W: BitWrite + ?Sized>(&self, value: &$ty, writer: &mut W) -> Result<(), EncodeError> {
                writer.write_varint_signed(i64::from(*value))
            }

            #[inline(always)]
            fn decode(&self, reader: &mut BitReader<'_>) -> Result<$ty, DecodeError> {
                let value = reader.read_varint_signed()?;
                <$ty>::try_from(value).map_err(|_| {
                    DecodeErrorKind::OutOfRange {
                        value: i128::from(value),
                        min: i128::from(<$ty>::MIN),
                        max: i128::from(<$ty>::MAX),
                    }
                    .into()
                })
            }

            fn min_bits(&self) -> usize {
                8
            }
        }
    )*};
}

varint_uint!(u8, u16, u32, u64);
varint_int!(i8, i16, i32, i64);

impl Codec<f32> for Quantize {
    #[inline(always)]
    fn encode<W: BitWrite + ?Sized>(&self, value: &f32, writer: &mut W) -> Result<(), EncodeError> {
        writer.write_quantized(*value, self)
    }

    #[inline(always)]
    fn decode(&self, reader: &mut BitReader<'_>) -> Result<f32, DecodeError> {
        reader.read_quantized(self)
    }

    fn min_bits(&self) -> usize {
        self.bits() as usize
    }
}

impl Codec<String> for MaxLen<Natural> {
    #[inline(always)]
    fn encode<W: BitWrite + ?Sized>(
        &self,
        value: &String,
        writer: &mut W,
    ) -> Result<(), EncodeError> {
        writer.write_str(value, self.max_len)
    }

    #[inline(always)]
    fn decode(&self, reader: &mut BitReader<'_>) -> Result<String, DecodeError> {
        let mut value = String::new();
        reader.read_string_into(&mut value, self.max_len)?;
        Ok(value)
    }

    #[inline(always)]
    fn decode_in_place(
        &self,
        value: &mut String,
        reader: &mut BitReader<'_>,
    ) -> Result<(), DecodeError> {
        reader.read_string_into(value, self.max_len)
    }

    fn min_bits(&self) -> usize {
        bits_for_span(self.max_len as u64) as usize
    }
}

impl<T, C: Codec<T>> Codec<Vec<T>> for MaxLen<C> {
    #[inline(always)]
    fn encode<W: BitWrite + ?Sized>(
        &self,
        values: &Vec<T>,
        writer: &mut W,
    ) -> Result<(), EncodeError> {
        writer.write_len(values.len(), self.max_len)?;
        values
            .iter()
            .try_for_each(|value| self.element.encode(value, writer))
    }

    #[inline(always)]
    fn decode(&self, reader: &mut BitReader<'_>) -> Result<Vec<T>, DecodeError> {
        let mut values = Vec::new();
        self.decode_in_place(&mut values, reader)?;
        Ok(values)
    }

    fn decode_in_place(
        &self,
        values: &mut Vec<T>,
        reader: &mut BitReader<'_>,
    ) -> Result<(), DecodeError> {
        let len = reader.read_len_for(self.max_len, self.element.min_bits())?;
        values.truncate(len);
        for value in values.iter_mut() {
            self.element.decode_in_place(value, reader)?;
        }
        values.reserve_exact(len - values.len());
        for _ in values.len()..len {
            values.push(self.element.decode(reader)?);
        }
        Ok(())
    }

    fn min_bits(&self) -> usize {
        bits_for_span(self.max_len as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BitWriter, DecodeErrorKind};

    fn round_trip<T, C: Codec<T>>(codec: &C, value: &T) -> (usize, T) {
        let mut buf = [0u8; 256];
        let mut writer = BitWriter::new(&mut buf);
        codec.encode(value, &mut writer).unwrap();
        let bits = writer.bits_written();
        let len = writer.finish().unwrap();
        let mut reader = BitReader::new(&buf[..len]);
        let decoded = codec.decode(&mut reader).unwrap();
        reader.finish().unwrap();
        (bits, decoded)
    }

    #[test]
    fn ranges_apply_to_each_array_element() {
        const HEALTH: Range = Range::new(0, 1000);
        assert_eq!(round_trip(&HEALTH, &[100u16, 1000]), (20, [100, 1000]));
    }

    #[test]
    fn negative_ranges_send_the_offset_from_min() {
        const OFFSET: Range = Range::new(-8, 7);
        assert_eq!(round_trip(&OFFSET, &-8i8), (4, -8));
        assert_eq!(round_trip(&OFFSET, &7i8), (4, 7));
    }

    #[test]
    fn a_range_wider_than_the_type_is_caught_on_decode() {
        const WIDE: Range = Range::new(0, 1000);
        let mut buf = [0u8; 4];
        let mut writer = BitWriter::new(&mut buf);
        writer.write_range(300, 0, 1000).unwrap();
        let len = writer.finish().unwrap();
        let error = Codec::<u8>::decode(&WIDE, &mut BitReader::new(&buf[..len])).unwrap_err();
        assert_eq!(
            error.kind,
            DecodeErrorKind::OutOfRange {
                value: 300,
                min: 0,
                max: 255
            }
        );
    }

    #[test]
    fn optional_and_sequence_forms_compose() {
        const SCORES: MaxLen<Varint> = MaxLen::new(4, Varint);
        assert_eq!(round_trip(&SCORES, &vec![1u32, 300]).1, vec![1, 300]);
        assert_eq!(round_trip(&Varint, &Some(-5i32)), (9, Some(-5)));
        assert_eq!(round_trip(&Varint, &None::<i32>), (1, None));
    }

    #[test]
    fn decoding_in_place_reuses_vectors_and_strings() {
        const NAMES: MaxLen<MaxLen<Natural>> = MaxLen::new(8, MaxLen::new(16, Natural));
        let names = vec!["ada".to_string(), "grace".to_string()];
        let mut buf = [0u8; 64];
        let mut writer = BitWriter::new(&mut buf);
        NAMES.encode(&names, &mut writer).unwrap();
        let len = writer.finish().unwrap();

        let mut target = vec![
            String::with_capacity(32),
            String::with_capacity(32),
            "x".into(),
        ];
        let first = target[0].as_ptr();
        NAMES
            .decode_in_place(&mut target, &mut BitReader::new(&buf[..len]))
            .unwrap();
        assert_eq!(target, names);
        assert_eq!(
            target[0].as_ptr(),
            first,
            "the first string's buffer was reused"
        );
    }

    #[test]
    fn a_sequence_longer_than_the_input_allows_is_refused_before_allocating() {
        const MANY: MaxLen<Natural> = MaxLen::new(1_000_000, Natural);
        let mut buf = [0u8; 8];
        let mut writer = BitWriter::new(&mut buf);
        writer.write_len(999_999, 1_000_000).unwrap();
        let len = writer.finish().unwrap();
        let error = Codec::<Vec<u64>>::decode(&MANY, &mut BitReader::new(&buf[..len])).unwrap_err();
        assert!(
            matches!(error.kind, DecodeErrorKind::Truncated { .. }),
            "{error}"
        );
    }
}
