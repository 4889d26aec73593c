//! `#[derive(Encode, Decode)]` for [`tickwire-wire`](https://docs.rs/tickwire-wire): declare a
//! message type once, with its bounds as field attributes.
//!
//! ```text
//! #[derive(Encode, Decode)]
//! struct Entity {
//!     #[wire(max_len = 32)]
//!     name: String,
//!     #[wire(min = 0, max = 1000)]
//!     health: [u16; 2],
//!     #[wire(quantize(min = -512.0, max = 512.0, resolution = 0.01))]
//!     position: [f32; 2],
//!     dead: bool,
//! }
//! ```
//!
//! Fields are encoded in declaration order; an enum first sends its variant's index in
//! `ceil(log2(variants))` bits. See the `codec` module of `tickwire-wire` for every attribute.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{format_ident, quote};
use syn::{Data, DeriveInput, Fields, Ident, Index, LitStr, Member, Type, parse_macro_input};

mod attributes;
mod replicate;

use attributes::FieldCodec;

/// Derives `tickwire_wire::Encode`.
#[proc_macro_derive(Encode, attributes(wire))]
pub fn derive_encode(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(&input, Direction::Encode)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Derives `tickwire_wire::Decode`.
#[proc_macro_derive(Decode, attributes(wire))]
pub fn derive_decode(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(&input, Direction::Decode)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Derives `tickwire_wire::Describe`: the type's wire layout as data, from the same
/// `#[wire(...)]` attributes, for generating other languages' codecs
/// (`tickwire_wire::schema::typescript`).
#[proc_macro_derive(Describe, attributes(wire))]
pub fn derive_describe(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    describe(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Derives `tickwire_wire::replicate::Replicate`: the type's fields one by one, for the
/// replication engine and the client mirrors. A struct with named fields (their
/// `#[wire(...)]` bounds as for a message; `#[replicate(owner_only)]` for a field only the
/// entity's owner is sent, `#[replicate(position)]` on the `[f32; 2]` that places it for
/// spatial interest), or an enum whose variants each wrap one such struct.
#[proc_macro_derive(Replicate, attributes(wire, replicate))]
pub fn derive_replicate(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    replicate::derive(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

fn describe(input: &DeriveInput) -> syn::Result<Tokens> {
    let name = &input.ident;
    let type_name = LitStr::new(&name.to_string(), name.span());
    let layout = match shape(input)? {
        Shape::Struct(_, fields) => {
            let fields = describe_fields(&fields);
            quote!(::tickwire_wire::schema::Layout::Struct { name: #type_name, fields: #fields })
        }
        Shape::Enum(variants) => {
            let variants = variants.iter().map(|(variant, fields)| {
                let variant_name = LitStr::new(&variant.ident.to_string(), variant.ident.span());
                let fields = describe_fields(fields);
                quote!((#variant_name, #fields))
            });
            quote!(::tickwire_wire::schema::Layout::Enum {
                name: #type_name,
                variants: ::std::vec![#(#variants),*],
            })
        }
    };
    Ok(quote! {
        #[automatically_derived]
        impl ::tickwire_wire::schema::Describe for #name {
            fn layout() -> ::tickwire_wire::schema::Layout {
                #layout
            }
        }
    })
}

/// What every derive accepts: a concrete struct (its shape and fields) or an enum with
/// variants (each with its fields).
enum Shape<'a> {
    Struct(&'a Fields, Vec<Field>),
    Enum(Vec<(&'a syn::Variant, Vec<Field>)>),
}

fn shape(input: &DeriveInput) -> syn::Result<Shape<'_>> {
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "wire messages cannot be generic: declare a concrete type per message",
        ));
    }
    match &input.data {
        Data::Struct(data) => Ok(Shape::Struct(&data.fields, fields(&data.fields)?)),
        Data::Enum(data) => {
            if data.variants.is_empty() {
                return Err(syn::Error::new_spanned(
                    &input.ident,
                    "an enum without variants has no value to encode",
                ));
            }
            let variants = data
                .variants
                .iter()
                .map(|variant| Ok((variant, fields(&variant.fields)?)))
                .collect::<syn::Result<Vec<_>>>()?;
            Ok(Shape::Enum(variants))
        }
        Data::Union(data) => Err(syn::Error::new_spanned(
            data.union_token,
            "unions cannot be encoded: use an enum",
        )),
    }
}

/// `vec![("name", layout), …]` of the fields, each described by its codec as it is encoded.
fn describe_fields(fields: &[Field]) -> Tokens {
    let entries = fields.iter().map(|field| {
        let name = &field.name;
        let layout = describe_field(field);
        quote!((#name, #layout))
    });
    quote!(::std::vec![#(#entries),*])
}

/// An expression for the field's `Layout`, as its codec encodes it.
fn describe_field(field: &Field) -> Tokens {
    let ty = &field.ty;
    match &field.codec {
        None => quote!(<#ty as ::tickwire_wire::schema::Describe>::layout()),
        Some(codec) => {
            let (codec_ty, codec_expr) = codec.tokens();
            quote! {{
                #[allow(clippy::unnecessary_cast, unused_parens)]
                const CODEC: #codec_ty = #codec_expr;
                <#codec_ty as ::tickwire_wire::schema::DescribeCodec<#ty>>::layout(&CODEC)
            }}
        }
    }
}

#[derive(Clone, Copy)]
enum Direction {
    Encode,
    Decode,
}

/// One field: how to name it in code and errors, its type, and its codec.
struct Field {
    member: Member,
    /// Local binding used when matching enum variants.
    binding: Ident,
    name: LitStr,
    ty: Type,
    codec: Option<FieldCodec>,
}

fn expand(input: &DeriveInput, direction: Direction) -> syn::Result<Tokens> {
    let body = match (shape(input)?, direction) {
        (Shape::Struct(_, fields), Direction::Encode) => encode_struct(&fields),
        (Shape::Struct(shape, fields), Direction::Decode) => decode_struct(shape, &fields),
        (Shape::Enum(variants), Direction::Encode) => encode_enum(&variants),
        (Shape::Enum(variants), Direction::Decode) => decode_enum(&variants),
    };
    Ok(body_impl(&input.ident, direction, body))
}

fn body_impl(name: &Ident, direction: Direction, body: Tokens) -> Tokens {
    match direction {
        Direction::Encode => quote! {
            #[automatically_derived]
            impl ::tickwire_wire::Encode for #name {
                #body
            }
        },
        Direction::Decode => quote! {
            #[automatically_derived]
            impl ::tickwire_wire::Decode for #name {
                #body
            }
        },
    }
}

fn fields(fields: &Fields) -> syn::Result<Vec<Field>> {
    fields
        .iter()
        .enumerate()
        .map(|(index, field)| {
            let (member, binding, name) = match &field.ident {
                Some(ident) => (
                    Member::Named(ident.clone()),
                    format_ident!("field_{}", ident),
                    LitStr::new(&ident.to_string(), ident.span()),
                ),
                None => (
                    Member::Unnamed(Index::from(index)),
                    format_ident!("field_{}", index),
                    LitStr::new(&index.to_string(), Span::call_site()),
                ),
            };
            Ok(Field {
                member,
                binding,
                name,
                ty: field.ty.clone(),
                codec: attributes::parse(&field.attrs)?,
            })
        })
        .collect()
}

/// Names the field in an error, then the enum variant around it if any.
fn error_path(field: &Field, variant: Option<&LitStr>) -> Tokens {
    let name = &field.name;
    match variant {
        Some(variant) => quote!(|error| error.in_field(#name).in_field(#variant)),
        None => quote!(|error| error.in_field(#name)),
    }
}

/// Statements that write `value` (an expression of type `&FieldType`).
fn encode_field(field: &Field, variant: Option<&LitStr>, value: &Tokens) -> Tokens {
    let path = error_path(field, variant);
    let write = match &field.codec {
        None => quote!(::tickwire_wire::Encode::encode(#value, writer)),
        Some(codec) => {
            let (codec_ty, codec_expr) = codec.tokens();
            quote! {{
                #[allow(clippy::unnecessary_cast, unused_parens)]
                const CODEC: #codec_ty = #codec_expr;
                ::tickwire_wire::Codec::encode(&CODEC, #value, writer)
            }}
        }
    };
    quote! {
        #write.map_err(#path)?;
    }
}

/// An expression that reads the field's value.
fn decode_field(field: &Field, variant: Option<&LitStr>) -> Tokens {
    let path = error_path(field, variant);
    let read = match &field.codec {
        None => quote!(::tickwire_wire::Decode::decode(reader)),
        Some(codec) => {
            let (codec_ty, codec_expr) = codec.tokens();
            quote! {{
                #[allow(clippy::unnecessary_cast, unused_parens)]
                const CODEC: #codec_ty = #codec_expr;
                ::tickwire_wire::Codec::decode(&CODEC, reader)
            }}
        }
    };
    quote!(#read.map_err(#path)?)
}

/// Statements that read the field over its current value.
fn decode_field_in_place(field: &Field) -> Tokens {
    let path = error_path(field, None);
    let member = &field.member;
    let read = match &field.codec {
        None => quote!(::tickwire_wire::Decode::decode_in_place(&mut self.#member, reader)),
        Some(codec) => {
            let (codec_ty, codec_expr) = codec.tokens();
            quote! {{
                #[allow(clippy::unnecessary_cast, unused_parens)]
                const CODEC: #codec_ty = #codec_expr;
                ::tickwire_wire::Codec::decode_in_place(&CODEC, &mut self.#member, reader)
            }}
        }
    };
    quote! {
        #read.map_err(#path)?;
    }
}

/// An expression for the fewest bits the field takes.
fn min_bits_field(field: &Field) -> Tokens {
    let ty = &field.ty;
    match &field.codec {
        None => quote!(<#ty as ::tickwire_wire::Decode>::min_bits()),
        Some(codec) => {
            let (codec_ty, codec_expr) = codec.tokens();
            quote! {{
                #[allow(clippy::unnecessary_cast, unused_parens)]
                const CODEC: #codec_ty = #codec_expr;
                <#codec_ty as ::tickwire_wire::Codec<#ty>>::min_bits(&CODEC)
            }}
        }
    }
}

fn encode_signature(body: Tokens) -> Tokens {
    quote! {
        #[inline]
        fn encode<W: ::tickwire_wire::BitWrite + ?Sized>(
            &self,
            writer: &mut W,
        ) -> ::core::result::Result<(), ::tickwire_wire::EncodeError> {
            #body
            ::core::result::Result::Ok(())
        }
    }
}

fn encode_struct(fields: &[Field]) -> Tokens {
    let writes = fields.iter().map(|field| {
        let member = &field.member;
        encode_field(field, None, &quote!(&self.#member))
    });
    encode_signature(quote!(#(#writes)*))
}

fn decode_struct(shape: &Fields, fields: &[Field]) -> Tokens {
    let construct = construct(&quote!(Self), shape, fields, None);
    let in_place = fields.iter().map(decode_field_in_place);
    let min_bits = fields.iter().map(min_bits_field);
    quote! {
        #[inline]
        fn decode(
            reader: &mut ::tickwire_wire::BitReader<'_>,
        ) -> ::core::result::Result<Self, ::tickwire_wire::DecodeError> {
            ::core::result::Result::Ok(#construct)
        }

        #[inline]
        fn decode_in_place(
            &mut self,
            reader: &mut ::tickwire_wire::BitReader<'_>,
        ) -> ::core::result::Result<(), ::tickwire_wire::DecodeError> {
            #(#in_place)*
            ::core::result::Result::Ok(())
        }

        fn min_bits() -> usize {
            0 #(+ #min_bits)*
        }
    }
}

/// `path { a: read, b: read }`, `path(read, read)` or `path`; struct expressions evaluate
/// their fields in the order written, which is the wire order.
fn construct(path: &Tokens, shape: &Fields, fields: &[Field], variant: Option<&LitStr>) -> Tokens {
    let reads = fields.iter().map(|field| decode_field(field, variant));
    match shape {
        Fields::Named(_) => {
            let members = fields.iter().map(|field| &field.member);
            quote!(#path { #(#members: #reads),* })
        }
        Fields::Unnamed(_) => quote!(#path(#(#reads),*)),
        Fields::Unit => quote!(#path),
    }
}

/// Constant expressions for the variant index's bit width and largest value.
fn variant_index_bounds(count: usize) -> (Tokens, Tokens) {
    let last = count as u64 - 1;
    (
        quote!(::tickwire_wire::bits_for_span(#last)),
        quote!(#last as i128),
    )
}

fn encode_enum(variants: &[(&syn::Variant, Vec<Field>)]) -> Tokens {
    let (bits, _) = variant_index_bounds(variants.len());
    let arms = variants
        .iter()
        .enumerate()
        .map(|(index, (variant, fields))| {
            let ident = &variant.ident;
            let variant_name = LitStr::new(&ident.to_string(), ident.span());
            let index = index as u64;
            let bindings = fields.iter().map(|field| &field.binding);
            let pattern = match &variant.fields {
                Fields::Named(_) => {
                    let members = fields.iter().map(|field| &field.member);
                    quote!(Self::#ident { #(#members: #bindings),* })
                }
                Fields::Unnamed(_) => quote!(Self::#ident(#(#bindings),*)),
                Fields::Unit => quote!(Self::#ident),
            };
            let writes = fields.iter().map(|field| {
                let binding = &field.binding;
                encode_field(field, Some(&variant_name), &quote!(#binding))
            });
            quote! {
                #pattern => {
                    writer.write_uint(#index, #bits)?;
                    #(#writes)*
                }
            }
        });
    encode_signature(quote! {
        use ::tickwire_wire::BitWrite as _;
        match self {
            #(#arms)*
        }
    })
}

fn decode_enum(variants: &[(&syn::Variant, Vec<Field>)]) -> Tokens {
    let (bits, last) = variant_index_bounds(variants.len());
    let arms = variants
        .iter()
        .enumerate()
        .map(|(index, (variant, fields))| {
            let ident = &variant.ident;
            let variant_name = LitStr::new(&ident.to_string(), ident.span());
            let index = index as u64;
            let construct = construct(
                &quote!(Self::#ident),
                &variant.fields,
                fields,
                Some(&variant_name),
            );
            quote! {
                #index => ::core::result::Result::Ok(#construct),
            }
        });
    let min_bits = {
        let per_variant = variants.iter().map(|(_, fields)| {
            let field_bits = fields.iter().map(min_bits_field);
            quote!(0 #(+ #field_bits)*)
        });
        quote!([#(#per_variant),*].into_iter().min().unwrap_or(0))
    };
    quote! {
        #[inline]
        fn decode(
            reader: &mut ::tickwire_wire::BitReader<'_>,
        ) -> ::core::result::Result<Self, ::tickwire_wire::DecodeError> {
            let index = reader.read_uint(#bits)?;
            match index {
                #(#arms)*
                other => ::core::result::Result::Err(
                    ::tickwire_wire::DecodeErrorKind::OutOfRange {
                        value: other as i128,
                        min: 0,
                        max: #last,
                    }
                    .into(),
                ),
            }
        }

        fn min_bits() -> usize {
            #bits as usize + #min_bits
        }
    }
}
