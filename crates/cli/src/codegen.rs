//! `tickwire codegen ts`: the arena's message types as TypeScript codecs, generated from
//! their `#[derive(Describe)]` (`tickwire_wire::schema`), so the Rust declaration is the only
//! one. The output is committed as [`ARENA_TYPESCRIPT`]; a test fails when it is stale, and
//! the TypeScript tests hold it to the golden vectors. A game of its own calls
//! `tickwire_wire::schema::typescript` with its own types the same way.

use tickwire_wire::schema::{CodegenError, typescript};

/// Where the generated arena codecs live, from the repository root.
pub const ARENA_TYPESCRIPT: &str = "clients/ts/arena/src/generated/messages.ts";

/// The arena's messages as TypeScript.
pub fn arena_typescript() -> Result<String, CodegenError> {
    typescript(&tickwire_arena::messages::layouts())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_arena_codecs_are_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(ARENA_TYPESCRIPT);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == arena_typescript().unwrap(),
            "{ARENA_TYPESCRIPT} is stale: run `cargo run -p tickwire -- codegen ts --out {ARENA_TYPESCRIPT}`"
        );
    }
}
