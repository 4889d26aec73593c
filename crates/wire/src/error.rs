//! Encode and decode errors, each naming the field and the bound that was broken.

use std::fmt;

/// Where in a message an error happened: the chain of field names from the outermost
/// type inwards, for example `snapshot.players.name`.
///
/// Stored inline (no allocation) because decoders build errors for hostile input at line
/// rate; chains deeper than [`FieldPath::CAPACITY`] keep their innermost names.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct FieldPath {
    /// Innermost name first; `push` appends outer names as the error unwinds.
    names: [&'static str; FieldPath::CAPACITY],
    len: u8,
    truncated: bool,
}

impl FieldPath {
    /// How many field names a path keeps.
    pub const CAPACITY: usize = 6;

    /// Adds an enclosing field's name (called while the error propagates outwards).
    pub fn push(&mut self, name: &'static str) {
        match self.names.get_mut(usize::from(self.len)) {
            Some(slot) => {
                *slot = name;
                self.len += 1;
            }
            None => self.truncated = true,
        }
    }

    /// True when no field name was recorded (the error came from a bare primitive).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The names from the outermost field inwards.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.names[..usize::from(self.len)].iter().rev().copied()
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.truncated {
            f.write_str("…")?;
        }
        for (i, name) in self.names().enumerate() {
            if i > 0 || self.truncated {
                f.write_str(".")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

impl fmt::Debug for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FieldPath({self})")
    }
}

/// What went wrong while encoding.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum EncodeErrorKind {
    /// An integer lies outside the range declared for it.
    #[error("value {value} outside range {min}..={max}")]
    OutOfRange {
        /// The value given.
        value: i128,
        /// Smallest value the field allows.
        min: i128,
        /// Largest value the field allows.
        max: i128,
    },
    /// A float lies outside its quantization range, or is NaN or infinite.
    #[error("value {value} outside quantization range {min}..={max}")]
    FloatOutOfRange {
        /// The value given.
        value: f64,
        /// Smallest value the field allows.
        min: f64,
        /// Largest value the field allows.
        max: f64,
    },
    /// A string, byte array or sequence is longer than its declared maximum.
    #[error("length {len} exceeds max {max}")]
    TooLong {
        /// Length given (bytes for strings and byte arrays, elements for sequences).
        len: usize,
        /// The declared maximum.
        max: usize,
    },
    /// The output buffer is too small for the value.
    #[error("output buffer of {capacity} bytes is full")]
    BufferFull {
        /// Size of the buffer the writer was given.
        capacity: usize,
    },
}

/// An encoding failure and the field it happened in; read it through
/// [`EncodeErrorInfo`]'s fields (`error.kind`, `error.path`).
///
/// Boxed so that `Result<T, EncodeError>` stays two words and returns in registers: an
/// inline error (a field path and three `i128` bounds) made every successful call copy
/// 168 bytes. The allocation happens only when encoding fails.
#[derive(Clone, PartialEq)]
pub struct EncodeError(Box<EncodeErrorInfo>);

/// What an [`EncodeError`] says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EncodeErrorInfo {
    /// What went wrong.
    pub kind: EncodeErrorKind,
    /// Which field, outermost first.
    pub path: FieldPath,
}

/// What went wrong while decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    /// The input ended before the value did.
    #[error("input truncated: needed {needed} more bits, {remaining} remain")]
    Truncated {
        /// Bits the value still needed.
        needed: usize,
        /// Bits left in the input.
        remaining: usize,
    },
    /// An integer (or a quantized float's step, or an enum's variant index) lies outside its
    /// declared range.
    #[error("value {value} outside range {min}..={max}")]
    OutOfRange {
        /// The value read.
        value: i128,
        /// Smallest value the field allows.
        min: i128,
        /// Largest value the field allows.
        max: i128,
    },
    /// A length prefix exceeds the declared maximum.
    #[error("length {len} exceeds max {max}")]
    TooLong {
        /// Length read.
        len: usize,
        /// The declared maximum.
        max: usize,
    },
    /// A string's bytes are not UTF-8.
    #[error("string is not valid utf-8")]
    InvalidUtf8,
    /// A varint is longer than needed or overflows 64 bits.
    #[error("varint is overlong or overflows 64 bits")]
    InvalidVarint,
    /// Alignment or trailing padding bits are not zero.
    #[error("padding bits are not zero")]
    NonZeroPadding,
    /// Whole bytes remain after the value ended.
    #[error("{bytes} trailing bytes after the value")]
    TrailingBytes {
        /// How many whole bytes were left unread.
        bytes: usize,
    },
}

/// A decoding failure and the field it happened in; read it through
/// [`DecodeErrorInfo`]'s fields (`error.kind`, `error.path`).
///
/// Boxed for the same reason as [`EncodeError`]; one small allocation per failed decode,
/// none per successful one.
#[derive(Clone, PartialEq, Eq)]
pub struct DecodeError(Box<DecodeErrorInfo>);

/// What a [`DecodeError`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeErrorInfo {
    /// What went wrong.
    pub kind: DecodeErrorKind,
    /// Which field, outermost first.
    pub path: FieldPath,
}

macro_rules! error_common {
    ($error:ident, $info:ident, $kind:ident) => {
        impl $error {
            /// Adds the name of the field the error happened in; derived code calls this
            /// for each enclosing field as the error propagates.
            #[must_use]
            #[cold]
            pub fn in_field(mut self, name: &'static str) -> Self {
                self.0.path.push(name);
                self
            }
        }

        impl std::ops::Deref for $error {
            type Target = $info;

            fn deref(&self) -> &$info {
                &self.0
            }
        }

        impl From<$kind> for $error {
            #[cold]
            fn from(kind: $kind) -> Self {
                Self(Box::new($info {
                    kind,
                    path: FieldPath::default(),
                }))
            }
        }

        impl fmt::Debug for $error {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }

        impl fmt::Display for $error {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                if self.path.is_empty() {
                    write!(f, "{}", self.kind)
                } else {
                    write!(f, "field `{}`: {}", self.path, self.kind)
                }
            }
        }

        impl std::error::Error for $error {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.kind)
            }
        }
    };
}

error_common!(EncodeError, EncodeErrorInfo, EncodeErrorKind);
error_common!(DecodeError, DecodeErrorInfo, DecodeErrorKind);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_the_field_path_outermost_first() {
        let error = DecodeError::from(DecodeErrorKind::TooLong { len: 40, max: 32 })
            .in_field("name")
            .in_field("players")
            .in_field("snapshot");
        assert_eq!(
            error.to_string(),
            "field `snapshot.players.name`: length 40 exceeds max 32"
        );
    }

    #[test]
    fn deep_paths_keep_the_innermost_names() {
        let mut error = EncodeError::from(EncodeErrorKind::OutOfRange {
            value: 1200,
            min: 0,
            max: 1000,
        });
        for name in ["a", "b", "c", "d", "e", "f", "g", "h"] {
            error = error.in_field(name);
        }
        assert_eq!(
            error.to_string(),
            "field `….f.e.d.c.b.a`: value 1200 outside range 0..=1000"
        );
    }
}
