//! `#[derive(Replicate)]`: a struct's fields one by one (change mask, masked writes and
//! reads, owner-only fields, its position), or an enum of such structs, one kind per variant.

use proc_macro2::TokenStream as Tokens;
use quote::quote;
use syn::{Data, DeriveInput, Fields, LitStr};

use crate::{decode_field_in_place, describe_field, encode_field, fields};

/// What `#[replicate(...)]` says of a field.
#[derive(Default)]
struct Role {
    owner_only: bool,
    position: bool,
}

fn role(field: &syn::Field) -> syn::Result<Role> {
    let mut role = Role::default();
    for attr in field
        .attrs
        .iter()
        .filter(|attr| attr.path().is_ident("replicate"))
    {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("owner_only") {
                role.owner_only = true;
                Ok(())
            } else if meta.path.is_ident("position") {
                role.position = true;
                Ok(())
            } else {
                Err(meta.error("unknown replicate attribute: expected `owner_only` or `position`"))
            }
        })?;
    }
    Ok(role)
}

pub(crate) fn derive(input: &DeriveInput) -> syn::Result<Tokens> {
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "replicated types cannot be generic: declare a concrete type per kind",
        ));
    }
    match &input.data {
        Data::Struct(data) => derive_struct(input, &data.fields),
        Data::Enum(data) => derive_enum(input, data),
        Data::Union(data) => Err(syn::Error::new_spanned(
            data.union_token,
            "unions cannot be replicated: use an enum of structs",
        )),
    }
}

fn derive_struct(input: &DeriveInput, shape: &Fields) -> syn::Result<Tokens> {
    let name = &input.ident;
    let Fields::Named(_) = shape else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "a replicated struct has named fields: they are what the mirrors call them",
        ));
    };
    let parsed = fields(shape)?;
    if parsed.len() > 64 {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "a replicated struct has at most 64 fields (one bit each in the change mask)",
        ));
    }
    let roles = shape.iter().map(role).collect::<syn::Result<Vec<_>>>()?;
    let positions: Vec<_> = parsed
        .iter()
        .zip(&roles)
        .filter(|(_, role)| role.position)
        .collect();
    if positions.len() > 1 {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "only one field can be the entity's position",
        ));
    }
    let position = match positions.first() {
        Some((field, _)) => {
            let member = &field.member;
            quote!(::core::option::Option::Some(::core::convert::Into::<[f32; 2]>::into(self.#member)))
        }
        None => quote!(::core::option::Option::None),
    };

    let type_name = LitStr::new(&name.to_string(), name.span());
    let count = parsed.len() as u32;
    let owner_only: u64 = roles
        .iter()
        .enumerate()
        .filter(|(_, role)| role.owner_only)
        .map(|(index, _)| 1u64 << index)
        .sum();
    let bit = |index: usize| {
        let bit = 1u64 << index;
        quote!(#bit)
    };
    let compares = parsed.iter().enumerate().map(|(index, field)| {
        let member = &field.member;
        let bit = bit(index);
        let same = match field.codec.as_ref().and_then(|codec| codec.grid()) {
            Some(grid) => quote! {{
                #[allow(clippy::unnecessary_cast, unused_parens)]
                const GRID: ::tickwire_wire::Quantize = #grid;
                ::tickwire_wire::replicate::SameSteps::same_steps(&self.#member, &baseline.#member, &GRID)
            }},
            None => quote!((self.#member == baseline.#member)),
        };
        quote! {
            if !#same {
                mask |= #bit;
            }
        }
    });
    let non_defaults = parsed.iter().enumerate().map(|(index, field)| {
        let member = &field.member;
        let ty = &field.ty;
        let bit = bit(index);
        let same = match field.codec.as_ref().and_then(|codec| codec.grid()) {
            Some(grid) => quote! {{
                #[allow(clippy::unnecessary_cast, unused_parens)]
                const GRID: ::tickwire_wire::Quantize = #grid;
                let default: #ty = ::core::default::Default::default();
                ::tickwire_wire::replicate::SameSteps::same_steps(&self.#member, &default, &GRID)
            }},
            None => quote! {{
                let default: #ty = ::core::default::Default::default();
                self.#member == default
            }},
        };
        quote! {
            if mask & #bit != 0 && !#same {
                out |= #bit;
            }
        }
    });
    let writes = parsed.iter().enumerate().map(|(index, field)| {
        let member = &field.member;
        let bit = bit(index);
        let write = encode_field(field, None, &quote!(&self.#member));
        quote! {
            if mask & #bit != 0 {
                #write
            }
        }
    });
    let reads = parsed.iter().enumerate().map(|(index, field)| {
        let bit = bit(index);
        let read = decode_field_in_place(field);
        quote! {
            if mask & #bit != 0 {
                #read
            }
        }
    });
    let resets = parsed.iter().enumerate().map(|(index, field)| {
        let member = &field.member;
        let bit = bit(index);
        quote! {
            if mask & #bit != 0 {
                self.#member = ::core::default::Default::default();
            }
        }
    });
    let copies = parsed.iter().enumerate().map(|(index, field)| {
        let member = &field.member;
        let bit = bit(index);
        quote! {
            if mask & #bit != 0 {
                ::core::clone::Clone::clone_from(&mut self.#member, &from.#member);
            }
        }
    });
    let defaults = parsed.iter().map(|field| {
        let member = &field.member;
        quote!(#member: ::core::default::Default::default())
    });
    let layouts = parsed.iter().zip(&roles).map(|(field, role)| {
        let field_name = &field.name;
        let layout = describe_field(field);
        let (owner_only, position) = (role.owner_only, role.position);
        quote! {
            ::tickwire_wire::replicate::FieldLayout {
                name: #field_name,
                layout: #layout,
                owner_only: #owner_only,
                position: #position,
            }
        }
    });
    Ok(quote! {
        #[automatically_derived]
        impl ::tickwire_wire::replicate::Replicate for #name {
            const KINDS: &'static [::tickwire_wire::replicate::KindInfo] =
                &[::tickwire_wire::replicate::KindInfo {
                    name: #type_name,
                    fields: #count,
                    owner_only: #owner_only,
                }];

            #[inline]
            fn kind(&self) -> usize {
                0
            }

            #[inline]
            fn changed(&self, baseline: &Self) -> ::tickwire_wire::replicate::FieldMask {
                let mut mask = 0;
                #(#compares)*
                mask
            }

            fn non_default(
                &self,
                mask: ::tickwire_wire::replicate::FieldMask,
            ) -> ::tickwire_wire::replicate::FieldMask {
                let mut out = 0;
                #(#non_defaults)*
                out
            }

            #[inline]
            fn encode_fields<W: ::tickwire_wire::BitWrite + ?Sized>(
                &self,
                mask: ::tickwire_wire::replicate::FieldMask,
                writer: &mut W,
            ) -> ::core::result::Result<(), ::tickwire_wire::EncodeError> {
                #(#writes)*
                ::core::result::Result::Ok(())
            }

            fn decode_new(
                _kind: usize,
                mask: ::tickwire_wire::replicate::FieldMask,
                reader: &mut ::tickwire_wire::BitReader<'_>,
            ) -> ::core::result::Result<Self, ::tickwire_wire::DecodeError> {
                let mut value = Self { #(#defaults),* };
                ::tickwire_wire::replicate::Replicate::decode_fields(&mut value, mask, reader)?;
                ::core::result::Result::Ok(value)
            }

            #[inline]
            fn decode_fields(
                &mut self,
                mask: ::tickwire_wire::replicate::FieldMask,
                reader: &mut ::tickwire_wire::BitReader<'_>,
            ) -> ::core::result::Result<(), ::tickwire_wire::DecodeError> {
                #(#reads)*
                ::core::result::Result::Ok(())
            }

            fn reset_fields(&mut self, mask: ::tickwire_wire::replicate::FieldMask) {
                #(#resets)*
            }

            fn copy_fields(&mut self, from: &Self, mask: ::tickwire_wire::replicate::FieldMask) {
                #(#copies)*
            }

            #[inline]
            fn position(&self) -> ::core::option::Option<[f32; 2]> {
                #position
            }

            fn layout() -> ::std::vec::Vec<::tickwire_wire::replicate::KindLayout> {
                ::std::vec![::tickwire_wire::replicate::KindLayout {
                    name: #type_name,
                    fields: ::std::vec![#(#layouts),*],
                }]
            }
        }
    })
}

fn derive_enum(input: &DeriveInput, data: &syn::DataEnum) -> syn::Result<Tokens> {
    let name = &input.ident;
    if data.variants.is_empty() || data.variants.len() > 256 {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "a replicated enum has 1 to 256 variants, one per kind",
        ));
    }
    let mut kinds = Vec::new();
    for variant in &data.variants {
        match &variant.fields {
            Fields::Unnamed(unnamed) if unnamed.unnamed.len() == 1 => {
                kinds.push((&variant.ident, &unnamed.unnamed[0].ty));
            }
            _ => {
                return Err(syn::Error::new_spanned(
                    variant,
                    "each variant of a replicated enum wraps one replicated struct: `Kind(KindStruct)`",
                ));
            }
        }
    }
    let idents: Vec<_> = kinds.iter().map(|(ident, _)| *ident).collect();
    let types: Vec<_> = kinds.iter().map(|(_, ty)| *ty).collect();
    let indices: Vec<usize> = (0..kinds.len()).collect();
    let last = kinds.len() as i128 - 1;
    Ok(quote! {
        #[automatically_derived]
        impl ::tickwire_wire::replicate::Replicate for #name {
            const KINDS: &'static [::tickwire_wire::replicate::KindInfo] =
                &[#(<#types as ::tickwire_wire::replicate::Replicate>::KINDS[0]),*];

            #[inline]
            fn kind(&self) -> usize {
                match self {
                    #(Self::#idents(_) => #indices,)*
                }
            }

            #[inline]
            fn changed(&self, baseline: &Self) -> ::tickwire_wire::replicate::FieldMask {
                match (self, baseline) {
                    #((Self::#idents(now), Self::#idents(then)) =>
                        ::tickwire_wire::replicate::Replicate::changed(now, then),)*
                    #[allow(unreachable_patterns)]
                    _ => Self::KINDS[self.kind()].all(),
                }
            }

            fn non_default(
                &self,
                mask: ::tickwire_wire::replicate::FieldMask,
            ) -> ::tickwire_wire::replicate::FieldMask {
                match self {
                    #(Self::#idents(inner) =>
                        ::tickwire_wire::replicate::Replicate::non_default(inner, mask),)*
                }
            }

            #[inline]
            fn encode_fields<W: ::tickwire_wire::BitWrite + ?Sized>(
                &self,
                mask: ::tickwire_wire::replicate::FieldMask,
                writer: &mut W,
            ) -> ::core::result::Result<(), ::tickwire_wire::EncodeError> {
                match self {
                    #(Self::#idents(inner) =>
                        ::tickwire_wire::replicate::Replicate::encode_fields(inner, mask, writer),)*
                }
            }

            fn decode_new(
                kind: usize,
                mask: ::tickwire_wire::replicate::FieldMask,
                reader: &mut ::tickwire_wire::BitReader<'_>,
            ) -> ::core::result::Result<Self, ::tickwire_wire::DecodeError> {
                match kind {
                    #(#indices => ::core::result::Result::Ok(Self::#idents(
                        <#types as ::tickwire_wire::replicate::Replicate>::decode_new(0, mask, reader)?,
                    )),)*
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

            #[inline]
            fn decode_fields(
                &mut self,
                mask: ::tickwire_wire::replicate::FieldMask,
                reader: &mut ::tickwire_wire::BitReader<'_>,
            ) -> ::core::result::Result<(), ::tickwire_wire::DecodeError> {
                match self {
                    #(Self::#idents(inner) =>
                        ::tickwire_wire::replicate::Replicate::decode_fields(inner, mask, reader),)*
                }
            }

            fn reset_fields(&mut self, mask: ::tickwire_wire::replicate::FieldMask) {
                match self {
                    #(Self::#idents(inner) =>
                        ::tickwire_wire::replicate::Replicate::reset_fields(inner, mask),)*
                }
            }

            fn copy_fields(&mut self, from: &Self, mask: ::tickwire_wire::replicate::FieldMask) {
                match (self, from) {
                    #((Self::#idents(to), Self::#idents(from)) =>
                        ::tickwire_wire::replicate::Replicate::copy_fields(to, from, mask),)*
                    #[allow(unreachable_patterns)]
                    _ => {}
                }
            }

            #[inline]
            fn position(&self) -> ::core::option::Option<[f32; 2]> {
                match self {
                    #(Self::#idents(inner) => ::tickwire_wire::replicate::Replicate::position(inner),)*
                }
            }

            fn layout() -> ::std::vec::Vec<::tickwire_wire::replicate::KindLayout> {
                let mut kinds = ::std::vec::Vec::new();
                #(kinds.extend(<#types as ::tickwire_wire::replicate::Replicate>::layout());)*
                kinds
            }
        }

        #(
            #[automatically_derived]
            impl ::core::convert::From<#types> for #name {
                fn from(kind: #types) -> Self {
                    Self::#idents(kind)
                }
            }

            #[automatically_derived]
            impl ::tickwire_wire::replicate::KindOf<#name> for #types {
                fn of(entity: &#name) -> ::core::option::Option<&Self> {
                    match entity {
                        #name::#idents(inner) => ::core::option::Option::Some(inner),
                        #[allow(unreachable_patterns)]
                        _ => ::core::option::Option::None,
                    }
                }

                fn of_mut(entity: &mut #name) -> ::core::option::Option<&mut Self> {
                    match entity {
                        #name::#idents(inner) => ::core::option::Option::Some(inner),
                        #[allow(unreachable_patterns)]
                        _ => ::core::option::Option::None,
                    }
                }
            }
        )*
    })
}
