//! What a message type looks like on the wire, as data: [`Layout`], from
//! `#[derive(Describe)]` (beside `Encode` and `Decode`, reading the same `#[wire(...)]`
//! attributes) and from the codecs' own [`DescribeCodec`] impls. Other languages' codecs are
//! generated from it ([`typescript`], [`typescript_replicated`], [`csharp_replicated`]), so a
//! game declares its messages and replicated state once, in Rust.
//!
//! ```
//! use tickwire_wire::{Decode, Describe, Encode};
//!
//! #[derive(Encode, Decode, Describe)]
//! struct Move {
//!     #[wire(quantize(min = -1.0, max = 1.0, resolution = 0.01))]
//!     x: f32,
//!     #[wire(bits = 4)]
//!     buttons: u8,
//! }
//!
//! let ts = tickwire_wire::schema::typescript(&[Move::layout()]).unwrap();
//! assert!(ts.contains("export const MoveCodec = struct({\n  x: quantized(-1, 1, 0.01),\n  buttons: uint(4),\n});"));
//! ```

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::Quantize;
use crate::codec::{Bits, MaxLen, Natural, Range, Varint};

mod csharp;

pub use csharp::csharp_replicated;

/// One value's wire layout.
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// One bit.
    Bool,
    /// An unsigned integer in exactly `bits` bits.
    Uint {
        /// 1 to 64.
        bits: u32,
        /// The Rust type, which `#[wire(bits = N)]` may make narrower or wider than `bits`.
        ty: IntType,
    },
    /// A two's complement integer in exactly `bits` bits (`i8` to `i64`).
    Int {
        /// 8, 16, 32 or 64.
        bits: u32,
    },
    /// An integer in `min..=max`, sent as its offset from `min`.
    Range {
        /// Smallest value.
        min: i128,
        /// Largest value.
        max: i128,
        /// The Rust type, whose own bounds the decoder also holds a value to.
        ty: IntType,
    },
    /// A LEB128 varint; signed ones (`ty.signed()`) zigzag-mapped first.
    Varint {
        /// The Rust type: the width a decoder narrows to.
        ty: IntType,
    },
    /// An IEEE 754 single.
    F32,
    /// An IEEE 754 double.
    F64,
    /// A float on a grid.
    Quantize {
        /// The grid's first value (as an `f32`).
        min: f64,
        /// The grid's last value (as an `f32`).
        max: f64,
        /// The step.
        resolution: f64,
    },
    /// UTF-8 of at most `max_len` bytes, length first.
    String {
        /// Bytes.
        max_len: usize,
    },
    /// Exactly `len` elements.
    Array {
        /// Elements.
        len: usize,
        /// Each element's layout.
        element: Box<Layout>,
    },
    /// At most `max_len` elements, length first.
    Vec {
        /// Elements.
        max_len: usize,
        /// Each element's layout.
        element: Box<Layout>,
    },
    /// A presence bit, then the value if present.
    Option(Box<Layout>),
    /// A named struct: its fields in order.
    Struct {
        /// The Rust type's name.
        name: &'static str,
        /// Field names (`0`, `1`, … for a tuple struct) and layouts, in wire order.
        fields: Vec<(&'static str, Layout)>,
    },
    /// A named enum: the variant's index in `bits_for_span(variants - 1)` bits, then its fields.
    Enum {
        /// The Rust type's name.
        name: &'static str,
        /// Variant names and their fields, in declaration order.
        variants: Vec<(&'static str, Vec<(&'static str, Layout)>)>,
    },
}

/// A Rust integer type: what a field holds, which its wire form alone may not say (a varint
/// or a range fits several), so that a generator can declare the field with the same type
/// and refuse what it cannot hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IntType {
    /// `u8`.
    U8,
    /// `u16`.
    U16,
    /// `u32`.
    U32,
    /// `u64`.
    U64,
    /// `i8`.
    I8,
    /// `i16`.
    I16,
    /// `i32`.
    I32,
    /// `i64`.
    I64,
}

impl IntType {
    /// Whether it is an `iN`.
    pub const fn signed(self) -> bool {
        matches!(self, Self::I8 | Self::I16 | Self::I32 | Self::I64)
    }

    /// Its width: 8, 16, 32 or 64.
    pub const fn bits(self) -> u32 {
        match self {
            Self::U8 | Self::I8 => 8,
            Self::U16 | Self::I16 => 16,
            Self::U32 | Self::I32 => 32,
            Self::U64 | Self::I64 => 64,
        }
    }

    /// Its smallest value.
    pub const fn min(self) -> i128 {
        match self.signed() {
            true => -(1 << (self.bits() - 1)),
            false => 0,
        }
    }

    /// Its largest value.
    pub const fn max(self) -> i128 {
        match self.signed() {
            true => (1 << (self.bits() - 1)) - 1,
            false => (1 << self.bits()) - 1,
        }
    }

    /// Its Rust name (`u8`, …).
    pub const fn name(self) -> &'static str {
        match self {
            Self::U8 => "u8",
            Self::U16 => "u16",
            Self::U32 => "u32",
            Self::U64 => "u64",
            Self::I8 => "i8",
            Self::I16 => "i16",
            Self::I32 => "i32",
            Self::I64 => "i64",
        }
    }
}

/// A type that encodes itself (`Encode`/`Decode`, no attribute needed): its layout.
pub trait Describe {
    /// The type's wire layout.
    fn layout() -> Layout;
}

/// A codec (what a `#[wire(...)]` attribute selects) applied to `T`: its layout.
pub trait DescribeCodec<T: ?Sized> {
    /// The layout of a `T` written with this codec.
    fn layout(&self) -> Layout;
}

macro_rules! describe_uint {
    ($($ty:ty => $int:ident),*) => {$(
        impl Describe for $ty {
            fn layout() -> Layout {
                Layout::Uint { bits: <$ty>::BITS, ty: IntType::$int }
            }
        }
        impl DescribeCodec<$ty> for Range {
            fn layout(&self) -> Layout {
                Layout::Range { min: self.min(), max: self.max(), ty: IntType::$int }
            }
        }
        impl DescribeCodec<$ty> for Bits {
            fn layout(&self) -> Layout {
                Layout::Uint { bits: self.count(), ty: IntType::$int }
            }
        }
        impl DescribeCodec<$ty> for Varint {
            fn layout(&self) -> Layout {
                Layout::Varint { ty: IntType::$int }
            }
        }
    )*};
}

macro_rules! describe_int {
    ($($ty:ty => $int:ident),*) => {$(
        impl Describe for $ty {
            fn layout() -> Layout {
                Layout::Int { bits: <$ty>::BITS }
            }
        }
        impl DescribeCodec<$ty> for Range {
            fn layout(&self) -> Layout {
                Layout::Range { min: self.min(), max: self.max(), ty: IntType::$int }
            }
        }
        impl DescribeCodec<$ty> for Varint {
            fn layout(&self) -> Layout {
                Layout::Varint { ty: IntType::$int }
            }
        }
    )*};
}

describe_uint!(u8 => U8, u16 => U16, u32 => U32, u64 => U64);
describe_int!(i8 => I8, i16 => I16, i32 => I32, i64 => I64);

impl Describe for bool {
    fn layout() -> Layout {
        Layout::Bool
    }
}

impl Describe for f32 {
    fn layout() -> Layout {
        Layout::F32
    }
}

impl Describe for f64 {
    fn layout() -> Layout {
        Layout::F64
    }
}

impl<T: Describe, const N: usize> Describe for [T; N] {
    fn layout() -> Layout {
        Layout::Array {
            len: N,
            element: Box::new(T::layout()),
        }
    }
}

impl<T: Describe> Describe for Option<T> {
    fn layout() -> Layout {
        Layout::Option(Box::new(T::layout()))
    }
}

impl<T: Describe> DescribeCodec<T> for Natural {
    fn layout(&self) -> Layout {
        T::layout()
    }
}

impl DescribeCodec<f32> for Quantize {
    fn layout(&self) -> Layout {
        Layout::Quantize {
            min: self.min(),
            max: self.max(),
            resolution: self.resolution(),
        }
    }
}

impl DescribeCodec<String> for MaxLen<Natural> {
    fn layout(&self) -> Layout {
        Layout::String {
            max_len: self.max_len(),
        }
    }
}

impl<T, C: DescribeCodec<T>> DescribeCodec<Vec<T>> for MaxLen<C> {
    fn layout(&self) -> Layout {
        Layout::Vec {
            max_len: self.max_len(),
            element: Box::new(self.element().layout()),
        }
    }
}

/// As the codecs' `[T; N]` and `Option<T>` forms (`codec.rs`, `containers!`).
macro_rules! describe_containers {
    ($codec:ty $(, $param:ident)?) => {
        impl<T, $($param,)? const N: usize> DescribeCodec<[T; N]> for $codec
        where
            $codec: DescribeCodec<T>,
        {
            fn layout(&self) -> Layout {
                Layout::Array { len: N, element: Box::new(DescribeCodec::<T>::layout(self)) }
            }
        }

        impl<T, $($param)?> DescribeCodec<Option<T>> for $codec
        where
            $codec: DescribeCodec<T>,
        {
            fn layout(&self) -> Layout {
                Layout::Option(Box::new(DescribeCodec::<T>::layout(self)))
            }
        }
    };
}

describe_containers!(Range);
describe_containers!(Bits);
describe_containers!(Varint);
describe_containers!(Quantize);
describe_containers!(MaxLen<C>, C);

/// Why a layout has no generated TypeScript or C#.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodegenError {
    /// The TypeScript SDK reads `iN` only for 8, 16 and 32 bits.
    #[error("{0}: the TypeScript SDK has no codec for a natural i64; declare a range or a varint")]
    Int64(String),
    /// Two different types share a name.
    #[error("two different types are both named {0}")]
    NameClash(String),
    /// A struct field or variant name TypeScript's object order would move.
    #[error("{0}: an integer-like name would reorder the wire in a TypeScript object")]
    IntegerLikeName(String),
    /// A field of a layout the C# replication runtime has no shape for yet.
    #[error("{path}: the C# mirror has no shape for {what} yet")]
    CsharpUnsupported {
        /// `Kind.field`.
        path: String,
        /// The layout, in words ("an option").
        what: &'static str,
    },
    /// An integer field whose wire form holds values its Rust type cannot: the Rust decoder
    /// refuses those, and the C# reader has no check that would.
    #[error(
        "{path}: {wire} holds values a {ty} cannot, which the C# mirror cannot refuse; declare bounds within the type"
    )]
    WiderThanType {
        /// `Kind.field`.
        path: String,
        /// The wire form ("the range 0..=300", "12 bits").
        wire: String,
        /// The Rust type.
        ty: &'static str,
    },
    /// A name the generated C# cannot hold: a member of its class taken twice or by the
    /// runtime, or a type name the generated code also uses for a runtime type.
    #[error("{path}: its C# name {name} {reason}")]
    CsharpName {
        /// `Kind.field`, or the type's name.
        path: String,
        /// The C# name (the field's, its `…Field` constant's or its `…Grid`'s).
        name: String,
        /// Whose it is already.
        reason: String,
    },
}

/// TypeScript for the `@tickwire/client` codec combinators of `roots` and every struct and
/// enum they contain, each as `export const NameCodec = …` and `export type Name = …`,
/// dependencies first. Field names become camelCase; an enum value is
/// `{ tag: "Variant", value: { …fields } }` (`value: null` for a unit variant).
pub fn typescript(roots: &[Layout]) -> Result<String, CodegenError> {
    let mut generator = TypeScript::default();
    for root in roots {
        generator.define(root)?;
    }
    let mut imports: Vec<&str> = generator.imports.iter().copied().collect();
    imports.sort_unstable();
    let mut out = String::from(
        "// Generated by `tickwire codegen ts` from the Rust types' `#[derive(Describe)]`\n\
         // (tickwire_wire::schema::typescript). Do not edit: change the Rust type and regenerate.\n",
    );
    let _ = writeln!(
        out,
        "import {{ type Infer, {} }} from \"@tickwire/client\";",
        imports.join(", ")
    );
    out.push_str(&generator.body);
    Ok(out)
}

/// TypeScript for a replicated world (`#[derive(Replicate)]`'s [`Replicate::layout`]): each
/// kind as `export const NameKind = kind("Name", { …fields }, { ownerOnly, position })` and
/// its `export type Name`, then `export const WorldWorld = replicated("World", [...])`, for
/// `@tickwire/client`'s `Mirror`. Struct and enum types inside fields come first, as
/// [`typescript`] writes them. A game calls it with its own type, in a test that keeps the
/// committed file current or in a build script.
///
/// [`Replicate::layout`]: crate::replicate::Replicate::layout
pub fn typescript_replicated(
    world: &str,
    kinds: &[crate::replicate::KindLayout],
) -> Result<String, CodegenError> {
    let mut generator = TypeScript::default();
    for kind in kinds {
        for field in &kind.fields {
            generator.define(&field.layout)?;
        }
    }
    let mut body = String::new();
    let mut names = Vec::new();
    for kind in kinds {
        let mut fields = String::new();
        for field in &kind.fields {
            check_name(kind.name, field.name)?;
            let codec = generator.codec(&format!("{}.{}", kind.name, field.name), &field.layout)?;
            let _ = writeln!(fields, "  {}: {codec},", camel_case(field.name));
        }
        let owner_only: Vec<String> = kind
            .fields
            .iter()
            .filter(|field| field.owner_only)
            .map(|field| format!("\"{}\"", camel_case(field.name)))
            .collect();
        let mut options = Vec::new();
        if !owner_only.is_empty() {
            options.push(format!("ownerOnly: [{}]", owner_only.join(", ")));
        }
        if let Some(position) = kind.fields.iter().find(|field| field.position) {
            options.push(format!("position: \"{}\"", camel_case(position.name)));
        }
        let options = match options.is_empty() {
            true => String::new(),
            false => format!(", {{ {} }}", options.join(", ")),
        };
        let name = kind.name;
        let _ = write!(
            body,
            "\nexport const {name}Kind = kind(\"{name}\", {{\n{fields}}}{options});\nexport type {name} = InferKind<typeof {name}Kind>;\n"
        );
        names.push(format!("{name}Kind"));
    }
    let _ = write!(
        body,
        "\nexport const {world}World = replicated(\"{world}\", [{}]);\n",
        names.join(", ")
    );
    generator.imports.insert("kind");
    generator.imports.insert("replicated");
    let mut imports: Vec<&str> = generator.imports.iter().copied().collect();
    imports.sort_unstable();
    let mut out = String::from(
        "// Generated by `tickwire codegen ts` from the Rust types' `#[derive(Replicate)]`\n\
         // (tickwire_wire::schema::typescript_replicated). Do not edit: change the Rust type and regenerate.\n",
    );
    let infer = match generator.body.is_empty() {
        true => "type InferKind",
        false => "type Infer, type InferKind",
    };
    let _ = writeln!(
        out,
        "import {{ {infer}, {} }} from \"@tickwire/client\";",
        imports.join(", ")
    );
    out.push_str(&generator.body);
    out.push_str(&body);
    Ok(out)
}

#[derive(Default)]
struct TypeScript {
    /// Named types already written, with their layouts (to catch two types of one name).
    defined: Vec<Layout>,
    names: HashSet<&'static str>,
    imports: HashSet<&'static str>,
    body: String,
}

impl TypeScript {
    /// Writes the named types inside `layout` (and `layout` itself if named).
    fn define(&mut self, layout: &Layout) -> Result<(), CodegenError> {
        match layout {
            Layout::Array { element, .. }
            | Layout::Vec { element, .. }
            | Layout::Option(element) => self.define(element),
            Layout::Struct { name, fields } => {
                for (_, field) in fields {
                    self.define(field)?;
                }
                self.write_named(name, layout)
            }
            Layout::Enum { name, variants } => {
                for (_, fields) in variants {
                    for (_, field) in fields {
                        self.define(field)?;
                    }
                }
                self.write_named(name, layout)
            }
            _ => Ok(()),
        }
    }

    fn write_named(&mut self, name: &'static str, layout: &Layout) -> Result<(), CodegenError> {
        if self.names.contains(name) {
            return match self.defined.contains(layout) {
                true => Ok(()),
                false => Err(CodegenError::NameClash(name.to_string())),
            };
        }
        let expression = match layout {
            Layout::Struct { fields, .. } => self.fields(name, fields)?,
            Layout::Enum { variants, .. } => {
                // The variants on their own too, for a client that shapes values its own way
                // (the arena's `{ type, ...fields }`) over the same layouts.
                self.imports.insert("enumOf");
                let mut out = String::from("{\n");
                for (variant, fields) in variants {
                    check_name(name, variant)?;
                    let codec = match fields.as_slice() {
                        [] => {
                            self.imports.insert("unit");
                            "unit".to_string()
                        }
                        fields => self.fields(name, fields)?.replace('\n', "\n  "),
                    };
                    let _ = writeln!(out, "  {variant}: {codec},");
                }
                out.push('}');
                let _ = write!(self.body, "\nexport const {name}Variants = {out};");
                format!("enumOf({name}Variants)")
            }
            _ => unreachable!("only structs and enums are named"),
        };
        let _ = write!(
            self.body,
            "\nexport const {name}Codec = {expression};\nexport type {name} = Infer<typeof {name}Codec>;\n"
        );
        self.names.insert(name);
        self.defined.push(layout.clone());
        Ok(())
    }

    fn fields(
        &mut self,
        owner: &str,
        fields: &[(&'static str, Layout)],
    ) -> Result<String, CodegenError> {
        self.imports.insert("struct");
        let mut out = String::from("struct({\n");
        for (field, layout) in fields {
            check_name(owner, field)?;
            let codec = self.codec(&format!("{owner}.{field}"), layout)?;
            let _ = writeln!(out, "  {}: {codec},", camel_case(field));
        }
        out.push_str("})");
        Ok(out)
    }

    /// The combinator expression of an inline layout (named ones by their constant).
    fn codec(&mut self, path: &str, layout: &Layout) -> Result<String, CodegenError> {
        let mut import = |name: &'static str| self.imports.insert(name);
        Ok(match layout {
            Layout::Bool => {
                import("bool");
                "bool".into()
            }
            Layout::Uint { bits, .. } if *bits <= 53 => {
                import("uint");
                format!("uint({bits})")
            }
            Layout::Uint { bits, .. } => {
                import("uintBig");
                format!("uintBig({bits})")
            }
            Layout::Int { bits: 64 } => return Err(CodegenError::Int64(path.to_string())),
            Layout::Int { bits } => {
                import("int");
                format!("int({bits})")
            }
            Layout::Range { min, max, .. } if min.abs() <= MAX_SAFE && max.abs() <= MAX_SAFE => {
                import("range");
                format!("range({min}, {max})")
            }
            Layout::Range { min, max, .. } => {
                import("rangeBig");
                format!("rangeBig({min}n, {max}n)")
            }
            Layout::Varint { ty } if !ty.signed() => {
                import("varint");
                "varint".into()
            }
            Layout::Varint { .. } => {
                import("varintSigned");
                "varintSigned".into()
            }
            Layout::F32 => {
                import("f32");
                "f32".into()
            }
            Layout::F64 => {
                import("f64");
                "f64".into()
            }
            Layout::Quantize {
                min,
                max,
                resolution,
            } => {
                import("quantized");
                format!("quantized({min}, {max}, {resolution})")
            }
            Layout::String { max_len } => {
                import("string");
                format!("string({max_len})")
            }
            Layout::Array { len, element } => {
                let element = self.codec(path, element)?;
                self.imports.insert("array");
                format!("array({element}, {len})")
            }
            Layout::Vec { max_len, element } => {
                let element = self.codec(path, element)?;
                self.imports.insert("vec");
                format!("vec({element}, {max_len})")
            }
            Layout::Option(inner) => {
                let inner = self.codec(path, inner)?;
                self.imports.insert("option");
                format!("option({inner})")
            }
            Layout::Struct { name, .. } | Layout::Enum { name, .. } => format!("{name}Codec"),
        })
    }
}

/// 2^53 − 1: the integers a JavaScript number holds exactly.
const MAX_SAFE: i128 = (1 << 53) - 1;

fn check_name(owner: &str, name: &str) -> Result<(), CodegenError> {
    match name.bytes().all(|byte| byte.is_ascii_digit()) {
        true => Err(CodegenError::IntegerLikeName(format!("{owner}.{name}"))),
        false => Ok(()),
    }
}

/// `snake_case` → `camelCase`, as the TypeScript SDK names fields.
fn camel_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        match c {
            '_' if !out.is_empty() => upper = true,
            c if upper => {
                out.extend(c.to_uppercase());
                upper = false;
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_camel_case() {
        assert_eq!(camel_case("map_width"), "mapWidth");
        assert_eq!(camel_case("tick_rate_hz"), "tickRateHz");
        assert_eq!(camel_case("x"), "x");
    }

    #[test]
    fn a_natural_i64_has_no_typescript_codec() {
        let layout = Layout::Struct {
            name: "Big",
            fields: vec![("value", Layout::Int { bits: 64 })],
        };
        assert_eq!(
            typescript(&[layout]),
            Err(CodegenError::Int64("Big.value".into()))
        );
    }

    #[test]
    fn integer_layouts_name_the_rust_type() {
        use crate::codec::{Bits, Range, Varint};
        assert_eq!(
            <u16 as Describe>::layout(),
            Layout::Uint {
                bits: 16,
                ty: IntType::U16
            }
        );
        assert_eq!(
            DescribeCodec::<u32>::layout(&Bits::new(4)),
            Layout::Uint {
                bits: 4,
                ty: IntType::U32
            }
        );
        assert_eq!(
            DescribeCodec::<i8>::layout(&Range::new(-5, 5)),
            Layout::Range {
                min: -5,
                max: 5,
                ty: IntType::I8
            }
        );
        assert_eq!(
            DescribeCodec::<i64>::layout(&Varint),
            Layout::Varint { ty: IntType::I64 }
        );
        assert_eq!((IntType::I16.min(), IntType::I16.max()), (-32768, 32767));
        assert_eq!(
            (IntType::U64.min(), IntType::U64.max()),
            (0, u64::MAX as i128)
        );
        assert_eq!(
            (IntType::I64.min(), IntType::I64.max()),
            (i64::MIN as i128, i64::MAX as i128)
        );
    }

    #[test]
    fn varints_and_ranges_keep_their_typescript_codecs() {
        let layout = Layout::Struct {
            name: "Counts",
            fields: vec![
                ("small", Layout::Varint { ty: IntType::U8 }),
                ("signed", Layout::Varint { ty: IntType::I32 }),
                (
                    "hp",
                    Layout::Range {
                        min: 0,
                        max: 100,
                        ty: IntType::U8,
                    },
                ),
                (
                    "nibble",
                    Layout::Uint {
                        bits: 4,
                        ty: IntType::U64,
                    },
                ),
            ],
        };
        let ts = typescript(&[layout]).unwrap();
        assert!(
            ts.contains("  small: varint,\n  signed: varintSigned,\n  hp: range(0, 100),\n  nibble: uint(4),\n"),
            "{ts}"
        );
    }

    #[test]
    fn two_types_of_one_name_are_refused() {
        let a = Layout::Struct {
            name: "Same",
            fields: vec![("a", Layout::Bool)],
        };
        let b = Layout::Struct {
            name: "Same",
            fields: vec![("b", Layout::Bool)],
        };
        assert_eq!(
            typescript(&[a.clone(), a.clone()]).map(|_| ()),
            Ok(()),
            "the same type twice is written once"
        );
        assert_eq!(
            typescript(&[a, b]),
            Err(CodegenError::NameClash("Same".into()))
        );
    }
}
