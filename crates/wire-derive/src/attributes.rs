//! Parsing `#[wire(...)]` field attributes into the codec they select.

use proc_macro2::{Span, TokenStream as Tokens};
use quote::quote;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Attribute, Expr};

/// How one element is encoded when the field is not natural.
pub(crate) enum ElementCodec {
    Natural,
    Range {
        min: Expr,
        max: Expr,
    },
    Bits(Expr),
    Varint,
    Quantize {
        min: Expr,
        max: Expr,
        resolution: Expr,
    },
}

/// The codec a field's attributes select.
pub(crate) struct FieldCodec {
    max_len: Option<Expr>,
    element: ElementCodec,
}

impl FieldCodec {
    /// The quantization grid of a `quantize(..)` field (or of its elements), as a constant
    /// expression: what a replicated field's change is measured on.
    pub(crate) fn grid(&self) -> Option<Tokens> {
        match &self.element {
            ElementCodec::Quantize {
                min,
                max,
                resolution,
            } => Some(quote!(::tickwire_wire::Quantize::new(
                (#min) as f64,
                (#max) as f64,
                (#resolution) as f64
            ))),
            _ => None,
        }
    }

    /// The codec's type and a constant expression building it.
    pub(crate) fn tokens(&self) -> (Tokens, Tokens) {
        let (element_ty, element_expr) = match &self.element {
            ElementCodec::Natural => (
                quote!(::tickwire_wire::codec::Natural),
                quote!(::tickwire_wire::codec::Natural),
            ),
            ElementCodec::Range { min, max } => (
                quote!(::tickwire_wire::codec::Range),
                quote!(::tickwire_wire::codec::Range::new((#min) as i128, (#max) as i128)),
            ),
            ElementCodec::Bits(bits) => (
                quote!(::tickwire_wire::codec::Bits),
                quote!(::tickwire_wire::codec::Bits::new((#bits) as u32)),
            ),
            ElementCodec::Varint => (
                quote!(::tickwire_wire::codec::Varint),
                quote!(::tickwire_wire::codec::Varint),
            ),
            ElementCodec::Quantize {
                min,
                max,
                resolution,
            } => (
                quote!(::tickwire_wire::Quantize),
                quote!(::tickwire_wire::Quantize::new(
                    (#min) as f64,
                    (#max) as f64,
                    (#resolution) as f64
                )),
            ),
        };
        match &self.max_len {
            None => (element_ty, element_expr),
            Some(max_len) => (
                quote!(::tickwire_wire::codec::MaxLen<#element_ty>),
                quote!(::tickwire_wire::codec::MaxLen::new((#max_len) as usize, #element_expr)),
            ),
        }
    }
}

/// Everything written in a field's `#[wire(...)]` attributes, before validation.
#[derive(Default)]
struct Written {
    min: Option<Expr>,
    max: Option<Expr>,
    bits: Option<Expr>,
    varint: Option<Span>,
    quantize: Option<(Expr, Expr, Expr)>,
    max_len: Option<Expr>,
    span: Option<Span>,
}

/// The codec selected by `attrs`, or `None` for a natural field.
pub(crate) fn parse(attrs: &[Attribute]) -> syn::Result<Option<FieldCodec>> {
    let mut written = Written::default();
    for attr in attrs.iter().filter(|attr| attr.path().is_ident("wire")) {
        written.span.get_or_insert(attr.path().span());
        attr.parse_nested_meta(|meta| parse_one(&mut written, &meta))?;
    }
    let Some(span) = written.span else {
        return Ok(None);
    };
    let element_choices = [
        written.min.is_some() || written.max.is_some(),
        written.bits.is_some(),
        written.varint.is_some(),
        written.quantize.is_some(),
    ];
    if element_choices.iter().filter(|chosen| **chosen).count() > 1 {
        return Err(syn::Error::new(
            span,
            "choose one of `min`/`max`, `bits`, `varint` and `quantize(..)` for a field",
        ));
    }
    let element = match written {
        Written {
            min: Some(min),
            max: Some(max),
            ..
        } => ElementCodec::Range { min, max },
        Written { min: Some(_), .. } | Written { max: Some(_), .. } => {
            return Err(syn::Error::new(span, "a range needs both `min` and `max`"));
        }
        Written {
            bits: Some(bits), ..
        } => ElementCodec::Bits(bits),
        Written {
            varint: Some(_), ..
        } => ElementCodec::Varint,
        Written {
            quantize: Some((min, max, resolution)),
            ..
        } => ElementCodec::Quantize {
            min,
            max,
            resolution,
        },
        _ => ElementCodec::Natural,
    };
    if written.max_len.is_none() && matches!(element, ElementCodec::Natural) {
        return Err(syn::Error::new(span, "empty `#[wire]` attribute"));
    }
    Ok(Some(FieldCodec {
        max_len: written.max_len,
        element,
    }))
}

fn parse_one(written: &mut Written, meta: &ParseNestedMeta<'_>) -> syn::Result<()> {
    let set = |slot: &mut Option<Expr>, meta: &ParseNestedMeta<'_>| -> syn::Result<()> {
        if slot.is_some() {
            return Err(meta.error("attribute given twice"));
        }
        *slot = Some(meta.value()?.parse()?);
        Ok(())
    };
    if meta.path.is_ident("min") {
        set(&mut written.min, meta)
    } else if meta.path.is_ident("max") {
        set(&mut written.max, meta)
    } else if meta.path.is_ident("bits") {
        set(&mut written.bits, meta)
    } else if meta.path.is_ident("max_len") {
        set(&mut written.max_len, meta)
    } else if meta.path.is_ident("varint") {
        written.varint = Some(meta.input.span());
        Ok(())
    } else if meta.path.is_ident("quantize") {
        let (mut min, mut max, mut resolution) = (None, None, None);
        meta.parse_nested_meta(|inner| {
            if inner.path.is_ident("min") {
                set(&mut min, &inner)
            } else if inner.path.is_ident("max") {
                set(&mut max, &inner)
            } else if inner.path.is_ident("resolution") {
                set(&mut resolution, &inner)
            } else {
                Err(inner.error("quantize takes `min`, `max` and `resolution`"))
            }
        })?;
        match (min, max, resolution) {
            (Some(min), Some(max), Some(resolution)) => {
                written.quantize = Some((min, max, resolution));
                Ok(())
            }
            _ => Err(meta.error("quantize needs `min`, `max` and `resolution`")),
        }
    } else {
        Err(meta.error(
            "unknown wire attribute: expected `min`, `max`, `bits`, `varint`, `quantize(..)` or `max_len`",
        ))
    }
}
