//! What a room shows the world beyond its players: the options it was created with, whether
//! it is locked, its label (key–value pairs matchmaking and `/api/rooms` filter on) and its
//! metadata (free text for listings). Options and filters come from the network, so every
//! type here is bounded and validated when built; a label and metadata come from the game
//! and are bounded the same way, so a listing never grows without limit.

use std::collections::BTreeMap;

/// Most entries in a room's options or label.
pub const MAX_ENTRIES: usize = 16;
/// Longest key of an option or label entry, in bytes.
pub const MAX_KEY_BYTES: usize = 32;
/// Longest value of an option or label entry, in bytes.
pub const MAX_VALUE_BYTES: usize = 128;
/// Longest metadata, in bytes.
pub const MAX_METADATA_BYTES: usize = 1024;
/// Longest label filter, in bytes.
pub const MAX_FILTER_BYTES: usize = 512;

/// Why a set of entries (options, a label) or a filter was refused; the text names the
/// value and the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListingError {
    /// More entries than [`MAX_ENTRIES`].
    #[error("{count} entries exceed max {MAX_ENTRIES}")]
    TooManyEntries {
        /// Entries given.
        count: usize,
    },
    /// A key that is empty, too long, or not made of `a-z`, `0-9`, `_`, `-`.
    #[error("key {0:?} is not 1 to {MAX_KEY_BYTES} of a-z, 0-9, '_', '-'")]
    BadKey(String),
    /// A value longer than [`MAX_VALUE_BYTES`].
    #[error("value of {key:?} is {len} bytes, exceeds max {MAX_VALUE_BYTES}")]
    ValueTooLong {
        /// Whose value.
        key: String,
        /// Its length.
        len: usize,
    },
    /// Metadata longer than [`MAX_METADATA_BYTES`].
    #[error("metadata is {0} bytes, exceeds max {MAX_METADATA_BYTES}")]
    MetadataTooLong(usize),
    /// A filter longer than [`MAX_FILTER_BYTES`].
    #[error("filter is {0} bytes, exceeds max {MAX_FILTER_BYTES}")]
    FilterTooLong(usize),
    /// A filter that does not parse.
    #[error("filter: {0}")]
    BadFilter(String),
}

fn check_key(key: &str) -> Result<(), ListingError> {
    let valid = !key.is_empty()
        && key.len() <= MAX_KEY_BYTES
        && key.bytes().all(|byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"_-".contains(&byte)
        });
    if valid {
        Ok(())
    } else {
        Err(ListingError::BadKey(
            key.chars().take(MAX_KEY_BYTES + 8).collect(),
        ))
    }
}

fn check_entry(key: &str, value: &str) -> Result<(), ListingError> {
    check_key(key)?;
    if value.len() > MAX_VALUE_BYTES {
        return Err(ListingError::ValueTooLong {
            key: key.to_string(),
            len: value.len(),
        });
    }
    Ok(())
}

/// Bounded key–value pairs: keys of `a-z`, `0-9`, `_`, `-` up to [`MAX_KEY_BYTES`], values
/// up to [`MAX_VALUE_BYTES`], at most [`MAX_ENTRIES`]. The shape of both a room's create
/// options and its label.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entries(BTreeMap<String, String>);

impl Entries {
    /// Checks every entry against the bounds.
    pub fn new(entries: impl IntoIterator<Item = (String, String)>) -> Result<Self, ListingError> {
        let mut map = BTreeMap::new();
        for (key, value) in entries {
            check_entry(&key, &value)?;
            map.insert(key, value);
            if map.len() > MAX_ENTRIES {
                return Err(ListingError::TooManyEntries { count: map.len() });
            }
        }
        Ok(Self(map))
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// Every entry, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .iter()
            .map(|(key, value)| (key.as_str(), value.as_str()))
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Sets one entry, within the bounds.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ListingError> {
        check_entry(key, value)?;
        if !self.0.contains_key(key) && self.0.len() >= MAX_ENTRIES {
            return Err(ListingError::TooManyEntries {
                count: self.0.len() + 1,
            });
        }
        self.0.insert(key.to_string(), value.to_string());
        Ok(())
    }

    /// Removes one entry; false if there was none.
    pub fn remove(&mut self, key: &str) -> bool {
        self.0.remove(key).is_some()
    }

    /// The value of `key` parsed as `T`, or `default` when absent. A present value that
    /// does not parse is an error naming it, for a room's `create` to refuse with.
    pub fn parse_or<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, String> {
        match self.get(key) {
            None => Ok(default),
            Some(text) => text
                .parse()
                .map_err(|_| format!("option {key} = {text:?} is not valid")),
        }
    }
}

/// The options a matchmaking request created a room with (`"options": {"rows": "6"}`),
/// bounded like [`Entries`]; the room's [`create`](crate::room::Room::create) validates
/// their meaning and may refuse them.
pub type RoomOptions = Entries;

/// A room's label: what matchmaking and listings filter on (`label.mode = "ranked"`).
pub type Label = Entries;

/// What a room shows in listings and to matchmaking, owned by the room (through its
/// context) and copied to the matchmaker whenever it changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// A locked room is never offered by matchmaking; its players stay.
    pub locked: bool,
    /// Key–value pairs that filters match.
    pub label: Label,
    /// Free text (JSON, say) for listings, at most [`MAX_METADATA_BYTES`].
    pub metadata: String,
}

/// Checks metadata against its bound.
pub fn check_metadata(metadata: &str) -> Result<(), ListingError> {
    if metadata.len() > MAX_METADATA_BYTES {
        return Err(ListingError::MetadataTooLong(metadata.len()));
    }
    Ok(())
}

/// A filter on labels, Nakama's query in small: clauses `label.KEY = "VALUE"` (or
/// `!=`) joined by `and`; a room matches when every clause holds, and a clause on a key the
/// label lacks holds only for `!=`. The empty filter matches every room.
///
/// ```
/// use tickwire_room::listing::{Label, LabelFilter};
///
/// let filter: LabelFilter = r#"label.mode = "ranked" and label.map != "desert""#.parse()?;
/// let ranked = Label::new([("mode".to_string(), "ranked".to_string())])?;
/// assert!(filter.matches(&ranked));
/// assert!(!filter.matches(&Label::default()));
/// # Ok::<(), tickwire_room::listing::ListingError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelFilter {
    clauses: Vec<Clause>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Clause {
    key: String,
    value: String,
    equal: bool,
}

impl LabelFilter {
    /// Whether `label` satisfies every clause.
    pub fn matches(&self, label: &Label) -> bool {
        self.clauses
            .iter()
            .all(|clause| (label.get(&clause.key) == Some(clause.value.as_str())) == clause.equal)
    }

    /// Whether the filter has no clause.
    pub fn is_empty(&self) -> bool {
        self.clauses.is_empty()
    }

    /// Each clause as `(key, value, equal)`: `label.key = "value"` when `equal`, else `!=`.
    /// For a directory that matches labels where this type does not run (a Redis script).
    pub fn clauses(&self) -> impl Iterator<Item = (&str, &str, bool)> {
        self.clauses
            .iter()
            .map(|clause| (clause.key.as_str(), clause.value.as_str(), clause.equal))
    }
}

impl std::str::FromStr for LabelFilter {
    type Err = ListingError;

    fn from_str(text: &str) -> Result<Self, ListingError> {
        if text.len() > MAX_FILTER_BYTES {
            return Err(ListingError::FilterTooLong(text.len()));
        }
        let mut clauses = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            if !clauses.is_empty() {
                rest = rest
                    .strip_prefix("and")
                    .filter(|after| after.starts_with(char::is_whitespace))
                    .ok_or_else(|| bad("clauses are joined by \"and\"", rest))?
                    .trim_start();
            }
            let (clause, after) = parse_clause(rest)?;
            clauses.push(clause);
            if clauses.len() > MAX_ENTRIES {
                return Err(ListingError::TooManyEntries {
                    count: clauses.len(),
                });
            }
            rest = after.trim_start();
        }
        Ok(Self { clauses })
    }
}

fn bad(what: &str, at: &str) -> ListingError {
    let at: String = at.chars().take(24).collect();
    ListingError::BadFilter(format!("{what} at {at:?}"))
}

/// One `label.KEY = "VALUE"` (quotes optional for a value without spaces) and what follows.
fn parse_clause(text: &str) -> Result<(Clause, &str), ListingError> {
    let after_prefix = text
        .strip_prefix("label.")
        .ok_or_else(|| bad("expected label.KEY", text))?;
    let key_len = after_prefix
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .unwrap_or(after_prefix.len());
    let key = &after_prefix[..key_len];
    check_key(key)?;
    let rest = after_prefix[key_len..].trim_start();
    let (equal, rest) = if let Some(rest) = rest.strip_prefix("!=") {
        (false, rest)
    } else if let Some(rest) = rest.strip_prefix('=') {
        (true, rest)
    } else {
        return Err(bad("expected = or !=", rest));
    };
    let rest = rest.trim_start();
    let (value, rest) = match rest.strip_prefix('"') {
        Some(quoted) => {
            let end = quoted
                .find('"')
                .ok_or_else(|| bad("unterminated quote", rest))?;
            (&quoted[..end], &quoted[end + 1..])
        }
        None => {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            if end == 0 {
                return Err(bad("expected a value", rest));
            }
            (&rest[..end], &rest[end..])
        }
    };
    check_entry(key, value)?;
    Ok((
        Clause {
            key: key.to_string(),
            value: value.to_string(),
            equal,
        },
        rest,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(pairs: &[(&str, &str)]) -> Label {
        Label::new(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()))).unwrap()
    }

    #[test]
    fn filters_match_every_clause() {
        let filter: LabelFilter = "label.mode = \"ranked\" and label.region=eu"
            .parse()
            .unwrap();
        assert!(filter.matches(&label(&[("mode", "ranked"), ("region", "eu")])));
        assert!(!filter.matches(&label(&[("mode", "ranked")])));
        assert!(!filter.matches(&label(&[("mode", "casual"), ("region", "eu")])));
        let not: LabelFilter = "label.mode != ranked".parse().unwrap();
        assert!(not.matches(&Label::default()), "a missing key is not equal");
        assert!(!not.matches(&label(&[("mode", "ranked")])));
        assert!("".parse::<LabelFilter>().unwrap().is_empty());
    }

    #[test]
    fn bad_filters_are_refused_with_where() {
        for (text, expected) in [
            ("mode = ranked", "expected label.KEY"),
            ("label.mode ranked", "expected = or !="),
            ("label.mode = \"ranked", "unterminated quote"),
            ("label.mode = a label.x = b", "joined by \"and\""),
            ("label.Mode = a", "not 1 to 32"),
            ("label.mode =", "expected a value"),
        ] {
            let error = text.parse::<LabelFilter>().unwrap_err().to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
        let long = format!("label.a = \"{}\"", "x".repeat(600));
        assert_eq!(
            long.parse::<LabelFilter>(),
            Err(ListingError::FilterTooLong(long.len()))
        );
    }

    #[test]
    fn entries_are_bounded() {
        let many = (0..17).map(|i| (format!("k{i}"), "v".to_string()));
        assert_eq!(
            Entries::new(many),
            Err(ListingError::TooManyEntries { count: 17 })
        );
        assert!(matches!(
            Entries::new([("K".to_string(), "v".to_string())]),
            Err(ListingError::BadKey(_))
        ));
        assert!(matches!(
            Entries::new([("k".to_string(), "v".repeat(129))]),
            Err(ListingError::ValueTooLong { len: 129, .. })
        ));
        let mut full = Entries::new((0..16).map(|i| (format!("k{i}"), String::new()))).unwrap();
        assert!(full.set("k0", "replaced").is_ok(), "replacing adds nothing");
        assert!(full.set("k16", "").is_err());
        assert_eq!(
            full.parse_or("k0", 7u8),
            Err("option k0 = \"replaced\" is not valid".into())
        );
        assert_eq!(full.parse_or("absent", 7u8), Ok(7));
    }
}
