//! A small game's entities and a seeded link between a world and its viewers' mirrors.

#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tickwire_replicate::{EntityId, Mirror, Replicate, ServerWorld, ViewerId, ack_message};

/// A player: placed, named, with stamina only its owner sees.
#[derive(Debug, Clone, PartialEq, Default, tickwire_wire::Replicate)]
pub(crate) struct Runner {
    #[replicate(position)]
    #[wire(quantize(min = 0.0, max = 256.0, resolution = 0.01))]
    pub(crate) position: [f32; 2],
    #[wire(max_len = 16)]
    pub(crate) name: String,
    #[wire(min = 0, max = 100)]
    pub(crate) health: u8,
    #[replicate(owner_only)]
    #[wire(min = 0, max = 1000)]
    pub(crate) stamina: u16,
}

/// A flag without a position: seen by every viewer whatever its interest.
#[derive(Debug, Clone, PartialEq, Default, tickwire_wire::Replicate)]
pub(crate) struct Score {
    #[wire(varint)]
    pub(crate) red: u32,
    #[wire(varint)]
    pub(crate) blue: u32,
}

#[derive(Debug, Clone, PartialEq, tickwire_wire::Replicate)]
pub(crate) enum Entity {
    Runner(Runner),
    Score(Score),
}

/// A viewer's end of the link.
pub(crate) struct Client {
    pub(crate) viewer: ViewerId,
    pub(crate) mirror: Mirror<Entity>,
    pub(crate) applied: u64,
    pub(crate) refused: u64,
}

/// A world, its clients, and a link that drops snapshots and acknowledgements.
pub(crate) struct Link {
    pub(crate) clients: Vec<Client>,
    pub(crate) rng: ChaCha8Rng,
    /// Chance a snapshot, and separately its acknowledgement, is lost.
    pub(crate) loss: f64,
    pub(crate) largest: usize,
}

impl Link {
    pub(crate) fn new(seed: u64, viewers: &[u64], world: &mut ServerWorld<Entity>) -> Self {
        let clients = viewers
            .iter()
            .map(|&viewer| {
                world.add_viewer(ViewerId(viewer));
                Client {
                    viewer: ViewerId(viewer),
                    mirror: Mirror::new(),
                    applied: 0,
                    refused: 0,
                }
            })
            .collect();
        Self {
            clients,
            rng: ChaCha8Rng::seed_from_u64(seed),
            loss: 0.0,
            largest: 0,
        }
    }

    /// One send: every snapshot crosses (or not), every applied one is acknowledged (or not).
    pub(crate) fn step(&mut self, world: &mut ServerWorld<Entity>, tick: u32) {
        let mut sent = Vec::new();
        world.snapshots(tick, |viewer, bytes| sent.push((viewer, bytes.to_vec())));
        for (viewer, bytes) in sent {
            self.largest = self.largest.max(bytes.len());
            if self.rng.random_bool(self.loss) {
                continue;
            }
            let client = self
                .clients
                .iter_mut()
                .find(|client| client.viewer == viewer)
                .expect("a snapshot for a known viewer");
            match client.mirror.apply(&bytes) {
                Ok(tick) => {
                    client.applied += 1;
                    if !self.rng.random_bool(self.loss) {
                        world
                            .ack(viewer, &ack_message(tick))
                            .expect("an ack of a sent tick");
                    }
                }
                Err(_) => client.refused += 1,
            }
        }
    }
}

/// What `viewer`'s mirror should hold of `id`: the world's state with the fields it is not
/// sent at their defaults.
pub(crate) fn as_seen_by(world: &ServerWorld<Entity>, id: EntityId, viewer: ViewerId) -> Entity {
    let mut state = world.get(id).expect("a live entity").clone();
    let kind = &Entity::KINDS[state.kind()];
    if world.owner(id) != Some(viewer) {
        state.reset_fields(kind.owner_only);
    }
    state
}

/// Whether the mirror holds exactly the entities of `expected`, each equal on the wire grid.
pub(crate) fn assert_mirrors(
    world: &ServerWorld<Entity>,
    client: &Client,
    expected: impl IntoIterator<Item = EntityId>,
) {
    let expected: Vec<EntityId> = expected.into_iter().collect();
    let held: Vec<EntityId> = client.mirror.iter().map(|(id, _)| id).collect();
    assert_eq!(
        held, expected,
        "viewer {:?} holds other entities",
        client.viewer
    );
    for id in expected {
        let want = as_seen_by(world, id, client.viewer);
        let have = client.mirror.get(id).unwrap();
        assert_eq!(
            want.changed(have),
            0,
            "viewer {:?}: entity {id} is {have:?}, the world has {want:?}",
            client.viewer
        );
    }
}

pub(crate) fn runner(x: f32, y: f32, name: &str) -> Entity {
    Entity::Runner(Runner {
        position: [x, y],
        name: name.into(),
        health: 100,
        stamina: 500,
    })
}
