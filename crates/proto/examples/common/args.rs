//! The examples' command lines: `--flag value` pairs, each value read by the flag's type.
//! Included by path (`#[path = "common/args.rs"] mod args;`).

use std::str::FromStr;

/// The command line's `--flag value` pairs, in order; an error when a flag has no value.
pub(crate) fn pairs() -> Result<Vec<(String, String)>, String> {
    let mut args = std::env::args().skip(1);
    let mut pairs = Vec::new();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        pairs.push((flag, value));
    }
    Ok(pairs)
}

/// `value`, given for `flag`, read as a `T`.
pub(crate) fn parse<T: FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("{flag}: cannot read {value:?}"))
}
