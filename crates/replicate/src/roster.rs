//! The roster every replicated room has without game code: one entry per seat (its member's
//! name, whether they are connected, and, for the member's own seat only, that it is theirs),
//! sent in each snapshot's roster section as entities are (`docs/REPLICATION.md`). The room's
//! host keeps it: a seat's entry is set when its member joins, changes when they lose or
//! regain their connection, and goes when they leave.

/// A roster entry: the member in one seat.
#[derive(Debug, Clone, PartialEq, Eq, Default, tickwire_wire::Replicate)]
pub struct Member {
    /// Display name, at most 32 bytes (as a connect token carries it).
    #[wire(max_len = 32)]
    pub name: String,
    /// False while their connection is lost and the seat held for them.
    pub connected: bool,
    /// True in the viewer's own entry: how a client learns its seat.
    #[replicate(owner_only)]
    pub you: bool,
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::PathBuf;

    use tickwire_wire::replicate::Replicate;

    use super::Member;

    /// The C# SDK's `Member` is the generator's output for this type, so the two cannot drift.
    #[test]
    fn the_csharp_member_is_generated_from_the_type() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../clients/csharp/src/Tickwire/Replication/Member.cs");
        let generated = tickwire_wire::schema::csharp_replicated(
            "Tickwire.Replication",
            "Member",
            &Member::layout(),
        )
        .unwrap();
        if std::env::var_os("TICKWIRE_BLESS").is_some() {
            fs::write(&path, &generated).unwrap();
        }
        let committed = fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{} is stale: TICKWIRE_BLESS=1 cargo test -p tickwire-replicate --lib roster\n{generated}",
            path.display()
        );
    }
}
