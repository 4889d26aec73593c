//! Replicated state, field by field: the [`Replicate`] trait `#[derive(Replicate)]` implements,
//! which the replication engine (`tickwire-replicate`) uses to send a game's entities as
//! deltas, and the mirrors in every client use to read them.
//!
//! A replicated type is a struct with named fields (each with its `#[wire(...)]` bounds, as in
//! a message), or an enum whose every variant wraps one such struct: the enum's variants are
//! the world's *kinds* of entity. Per field the derive knows whether it changed against a
//! baseline (on its wire grid: a quantized float that moved less than a step has not
//! changed), how to write and read it, and whether only the entity's owner sees it
//! (`#[replicate(owner_only)]`). A `[f32; 2]` field marked `#[replicate(position)]` places the
//! entity for spatial interest.
//!
//! ```
//! use tickwire_wire::Replicate;
//! use tickwire_wire::replicate::Replicate as _;
//!
//! #[derive(Debug, Clone, PartialEq, Replicate)]
//! struct Runner {
//!     #[replicate(position)]
//!     #[wire(quantize(min = 0.0, max = 64.0, resolution = 0.01))]
//!     position: [f32; 2],
//!     #[wire(max_len = 16)]
//!     name: String,
//!     #[replicate(owner_only)]
//!     #[wire(min = 0, max = 99)]
//!     stamina: u8,
//! }
//!
//! let a = Runner { position: [1.0, 2.0], name: "ada".into(), stamina: 50 };
//! let mut b = a.clone();
//! b.position[0] += 0.001; // less than a step: unchanged on the wire
//! b.stamina = 49;
//! assert_eq!(b.changed(&a), 0b100);
//! assert_eq!(Runner::KINDS[0].owner_only, 0b100);
//! assert_eq!(b.position(), Some([1.001, 2.0]));
//! ```

use crate::error::{DecodeError, EncodeError};
use crate::quantize::Quantize;
use crate::reader::BitReader;
use crate::schema::Layout;
use crate::writer::BitWrite;

/// One bit per field of a kind, bit `i` for the `i`-th field declared.
pub type FieldMask = u64;

/// Most fields a replicated struct may declare: one bit each in a [`FieldMask`].
pub const MAX_FIELDS: usize = 64;

/// Most kinds a replicated enum may declare.
pub const MAX_KINDS: usize = 256;

/// What the engine and the mirrors need to know of one kind, as constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindInfo {
    /// The struct's name.
    pub name: &'static str,
    /// Fields it declares: the width of its field mask on the wire.
    pub fields: u32,
    /// The fields only the entity's owner is sent.
    pub owner_only: FieldMask,
}

impl KindInfo {
    /// Every field's bit.
    pub const fn all(&self) -> FieldMask {
        if self.fields as usize >= MAX_FIELDS {
            FieldMask::MAX
        } else {
            (1 << self.fields) - 1
        }
    }
}

/// One field of a kind, as data: for generating the mirrors in other languages.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldLayout {
    /// The field's name.
    pub name: &'static str,
    /// How it is written.
    pub layout: Layout,
    /// Sent only to the entity's owner.
    pub owner_only: bool,
    /// The entity's position for spatial interest.
    pub position: bool,
}

/// One kind, as data.
#[derive(Debug, Clone, PartialEq)]
pub struct KindLayout {
    /// The struct's name.
    pub name: &'static str,
    /// Its fields in declaration (wire) order.
    pub fields: Vec<FieldLayout>,
}

/// A replicated entity type; derive it with `#[derive(Replicate)]`.
///
/// Every method taking a `kind` or a mask trusts its caller to pass one of this type's kinds
/// (`0..KINDS.len()`) and, for `&self` methods, `self`'s own kind: the engine and the mirrors
/// check what they read from the network before calling.
pub trait Replicate: Clone + PartialEq + Sized {
    /// The kinds, by index: one for a struct, one per variant for an enum.
    const KINDS: &'static [KindInfo];

    /// `self`'s kind.
    fn kind(&self) -> usize;

    /// The fields whose wire value differs from `baseline`'s; `baseline` is of `self`'s kind.
    fn changed(&self, baseline: &Self) -> FieldMask;

    /// The fields in `mask` whose value is not their default (on the wire grid).
    fn non_default(&self, mask: FieldMask) -> FieldMask;

    /// Writes the fields in `mask`, in declaration order.
    fn encode_fields<W: BitWrite + ?Sized>(
        &self,
        mask: FieldMask,
        writer: &mut W,
    ) -> Result<(), EncodeError>;

    /// A new entity of `kind`: the fields in `mask` read, the others at their defaults.
    fn decode_new(
        kind: usize,
        mask: FieldMask,
        reader: &mut BitReader<'_>,
    ) -> Result<Self, DecodeError>;

    /// Reads the fields in `mask` over `self`'s, reusing their allocations.
    fn decode_fields(
        &mut self,
        mask: FieldMask,
        reader: &mut BitReader<'_>,
    ) -> Result<(), DecodeError>;

    /// Puts the fields in `mask` back to their defaults: what a member who is not sent them
    /// holds.
    fn reset_fields(&mut self, mask: FieldMask);

    /// Copies the fields in `mask` from `from`, of `self`'s kind (nothing otherwise).
    fn copy_fields(&mut self, from: &Self, mask: FieldMask);

    /// Where the entity is, for spatial interest: its `#[replicate(position)]` field.
    fn position(&self) -> Option<[f32; 2]>;

    /// Every kind's fields, for code generation.
    fn layout() -> Vec<KindLayout>;
}

/// A kind of a replicated enum (the struct one variant wraps), reached from the enum; the
/// derive implements it for each variant, and every replicated type is a kind of itself.
pub trait KindOf<E>: Sized {
    /// `entity` as this kind, if it is one.
    fn of(entity: &E) -> Option<&Self>;
    /// `entity` as this kind, mutably, if it is one.
    fn of_mut(entity: &mut E) -> Option<&mut Self>;
}

impl<T: Replicate> KindOf<T> for T {
    fn of(entity: &T) -> Option<&Self> {
        Some(entity)
    }

    fn of_mut(entity: &mut T) -> Option<&mut Self> {
        Some(entity)
    }
}

/// Equality on a quantization grid: what `#[derive(Replicate)]` compares a quantized field
/// with, so a value that moved by less than a step is not sent again.
pub trait SameSteps {
    /// Whether `self` and `other` encode to the same steps of `grid`.
    fn same_steps(&self, other: &Self, grid: &Quantize) -> bool;
}

impl SameSteps for f32 {
    #[inline(always)]
    fn same_steps(&self, other: &Self, grid: &Quantize) -> bool {
        // A value the grid refuses (NaN, out of range) compares by bits: it cannot be sent,
        // and the engine counts it when it tries.
        match (grid.step_of(*self), grid.step_of(*other)) {
            (Ok(a), Ok(b)) => a == b,
            _ => self.to_bits() == other.to_bits(),
        }
    }
}

impl<T: SameSteps, const N: usize> SameSteps for [T; N] {
    #[inline(always)]
    fn same_steps(&self, other: &Self, grid: &Quantize) -> bool {
        self.iter().zip(other).all(|(a, b)| a.same_steps(b, grid))
    }
}

impl<T: SameSteps> SameSteps for Option<T> {
    fn same_steps(&self, other: &Self, grid: &Quantize) -> bool {
        match (self, other) {
            (Some(a), Some(b)) => a.same_steps(b, grid),
            (None, None) => true,
            _ => false,
        }
    }
}

impl<T: SameSteps> SameSteps for Vec<T> {
    fn same_steps(&self, other: &Self, grid: &Quantize) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a.same_steps(b, grid))
    }
}
