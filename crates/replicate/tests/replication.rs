//! The replication engine end to end: a world, its viewers' mirrors, and a seeded link.

mod support;

use rand::Rng;
use support::{Entity, Link, Runner, Score, as_seen_by, assert_mirrors, runner};
use tickwire_replicate::{
    AckError, Audience, Change, Interest, MAX_HISTORY, Mirror, MirrorError, ReplicationConfig,
    ServerWorld, ViewerId, ack_message,
};

fn world(config: ReplicationConfig) -> ServerWorld<Entity> {
    let mut world = ServerWorld::new(config).unwrap();
    world.set_tick_rate(30);
    world
}

/// Random spawns, despawns, moves and renames for a while over a link that loses a third of
/// the snapshots and a third of the acknowledgements; once the link is clean and the world
/// still, every mirror holds exactly the world as its viewer is allowed to see it.
#[test]
fn mirrors_over_a_lossy_link_converge_to_the_world() {
    for seed in 0..8 {
        let mut world = world(ReplicationConfig::default());
        let mut link = Link::new(seed, &[1, 2, 3], &mut world);
        link.loss = 0.33;
        let mut live = Vec::new();
        let score = world.spawn(Score::default()).unwrap();
        for tick in 1..=300u32 {
            let rng = &mut link.rng;
            if live.len() < 40 && rng.random_bool(0.3) {
                let id = world
                    .spawn(runner(rng.random_range(0.0..256.0), 5.0, "new"))
                    .unwrap();
                world.set_owner(id, Some(ViewerId(rng.random_range(1..=3))));
                live.push(id);
            }
            if !live.is_empty() && rng.random_bool(0.1) {
                let id = live.swap_remove(rng.random_range(0..live.len()));
                world.despawn(id).unwrap();
            }
            for &id in &live {
                let Entity::Runner(runner) = world.get_mut(id).unwrap() else {
                    unreachable!()
                };
                if rng.random_bool(0.5) {
                    runner.position[0] = rng.random_range(0.0..256.0);
                }
                if rng.random_bool(0.1) {
                    runner.stamina = rng.random_range(0..=1000);
                }
                if rng.random_bool(0.02) {
                    runner.name = format!("r{}", rng.random_range(0..1000));
                }
            }
            world.kind_mut::<Score>(score).unwrap().red += 1;
            if rng.random_bool(0.05) {
                let seat = rng.random_range(0..6u16);
                match rng.random_bool(0.3) {
                    true => world.remove_member(seat),
                    false => {
                        let viewer = ViewerId(rng.random_range(1..=3));
                        let connected = rng.random_bool(0.7);
                        world.set_member(seat, viewer, &format!("m{seat}"), connected);
                    }
                }
            }
            link.step(&mut world, tick);
        }
        link.loss = 0.0;
        for tick in 301..=340 {
            link.step(&mut world, tick);
        }
        let mut expected: Vec<_> = live.clone();
        expected.push(score);
        expected.sort_unstable();
        for client in &link.clients {
            assert!(
                client.applied > 100,
                "seed {seed}: {} applied",
                client.applied
            );
            assert_mirrors(&world, client, expected.iter().copied());
            let roster: Vec<_> = client
                .mirror
                .roster()
                .map(|(s, m)| (s, m.clone()))
                .collect();
            let want: Vec<_> = world
                .roster()
                .map(|(seat, member)| {
                    let mut member = member.clone();
                    member.you &= world_owner_of_seat(&world, seat) == Some(client.viewer);
                    (seat, member)
                })
                .collect();
            assert_eq!(
                roster, want,
                "seed {seed}: viewer {:?}'s roster",
                client.viewer
            );
        }
        assert!(link.largest <= world.config().packet_budget);
        assert_eq!(world.stats().acks_refused, 0);
    }
}

/// The viewer whose seat it is: the one the roster's `you` names.
fn world_owner_of_seat(world: &ServerWorld<Entity>, seat: u16) -> Option<ViewerId> {
    world.seat_owner(seat)
}

#[test]
fn only_the_owner_is_sent_owner_only_fields() {
    let mut world = world(ReplicationConfig::default());
    let mut link = Link::new(1, &[1, 2], &mut world);
    let id = world.spawn(runner(1.0, 1.0, "ada")).unwrap();
    world.set_owner(id, Some(ViewerId(1)));
    link.step(&mut world, 1);
    let stamina = |client: usize, link: &Link| match link.clients[client].mirror.get(id) {
        Some(Entity::Runner(runner)) => runner.stamina,
        other => panic!("{other:?}"),
    };
    assert_eq!(stamina(0, &link), 500);
    assert_eq!(stamina(1, &link), 0, "not the owner: the default");

    world.kind_mut::<Runner>(id).unwrap().stamina = 10;
    link.step(&mut world, 2);
    assert_eq!(stamina(0, &link), 10);
    assert_eq!(
        link.clients[1].mirror.changes(),
        &[],
        "a change the viewer is not sent is no change to it"
    );

    // A new owner is sent the field at once.
    world.set_owner(id, Some(ViewerId(2)));
    link.step(&mut world, 3);
    assert_eq!(stamina(1, &link), 10);
}

#[test]
fn an_audience_limits_who_is_sent_an_entity() {
    let mut world = world(ReplicationConfig::default());
    let mut link = Link::new(1, &[1, 2, 3], &mut world);
    let secret = world.spawn(runner(1.0, 1.0, "spy")).unwrap();
    let open = world.spawn(runner(2.0, 1.0, "guard")).unwrap();
    world.set_audience(secret, Audience::Only(vec![ViewerId(1), ViewerId(3)]));
    link.step(&mut world, 1);
    assert_mirrors(&world, &link.clients[0], [secret, open]);
    assert_mirrors(&world, &link.clients[1], [open]);
    assert_mirrors(&world, &link.clients[2], [secret, open]);

    // Leaving the audience is a destroy.
    world.set_audience(secret, Audience::Only(vec![ViewerId(1)]));
    link.step(&mut world, 2);
    assert_eq!(link.clients[2].mirror.changes(), &[Change::Removed(secret)]);
}

#[test]
fn radius_interest_sends_what_is_near_the_focus_and_everything_unplaced() {
    let config = ReplicationConfig {
        interest: Interest::Radius {
            radius: 20.0,
            cell_size: 10.0,
        },
        ..ReplicationConfig::default()
    };
    let mut world = world(config);
    let mut link = Link::new(1, &[1], &mut world);
    let near = world.spawn(runner(105.0, 100.0, "near")).unwrap();
    let edge = world.spawn(runner(119.0, 100.0, "edge")).unwrap();
    let far = world.spawn(runner(150.0, 100.0, "far")).unwrap();
    let score = world.spawn(Score::default()).unwrap();

    link.step(&mut world, 1);
    assert_mirrors(&world, &link.clients[0], [score]);

    world.set_focus(ViewerId(1), Some([100.0, 100.0]));
    link.step(&mut world, 2);
    assert_mirrors(&world, &link.clients[0], [near, edge, score]);

    // Just past the radius but within 10% more: an entity in view stays.
    world.kind_mut::<Runner>(edge).unwrap().position[0] = 121.5;
    link.step(&mut world, 3);
    assert_mirrors(&world, &link.clients[0], [near, edge, score]);
    world.kind_mut::<Runner>(edge).unwrap().position[0] = 123.0;
    link.step(&mut world, 4);
    assert_mirrors(&world, &link.clients[0], [near, score]);

    // The viewer moves; what it sees follows.
    world.set_focus(ViewerId(1), Some([150.0, 100.0]));
    link.step(&mut world, 5);
    assert_mirrors(&world, &link.clients[0], [far, score]);
}

#[test]
fn the_cap_keeps_the_nearest() {
    let config = ReplicationConfig {
        max_entities: 3,
        interest: Interest::Radius {
            radius: 100.0,
            cell_size: 50.0,
        },
        ..ReplicationConfig::default()
    };
    let mut world = world(config);
    let mut link = Link::new(1, &[1], &mut world);
    world.set_focus(ViewerId(1), Some([0.0, 0.0]));
    let ids: Vec<_> = (0..6)
        .map(|n| world.spawn(runner(10.0 * n as f32, 0.0, "n")).unwrap())
        .collect();
    link.step(&mut world, 1);
    assert_mirrors(&world, &link.clients[0], ids[..3].iter().copied());
}

/// 200 entities all moving every tick, a budget for far fewer: every snapshot fits, and
/// no entity waits long, because the priority of one left out grows until it wins.
#[test]
fn under_a_tight_budget_every_change_gets_through_in_turn() {
    let config = ReplicationConfig {
        max_entities: 255,
        packet_budget: 600,
        bandwidth_bytes_per_sec: 12_000,
        ..ReplicationConfig::default()
    };
    let mut world = world(config);
    let mut link = Link::new(1, &[1], &mut world);
    let ids: Vec<_> = (0..200)
        .map(|n| world.spawn(runner(n as f32, 0.0, "n")).unwrap())
        .collect();
    let mut last_seen = vec![0u32; ids.len()];
    let mut worst_wait = 0;
    for tick in 1..=600u32 {
        for &id in &ids {
            world.kind_mut::<Runner>(id).unwrap().position[1] = (tick % 200) as f32;
        }
        link.step(&mut world, tick);
        for change in link.clients[0].mirror.changes() {
            if let Change::Changed(id, _) | Change::Added(id) = *change {
                let index = ids.iter().position(|&x| x == id).unwrap();
                if tick > 120 {
                    worst_wait = worst_wait.max(tick - last_seen[index]);
                }
                last_seen[index] = tick;
            }
        }
    }
    // 12,000 B/s at 30 Hz is 400 B a tick: about 60 of the 200 updates each tick.
    assert!(link.largest <= 600, "a snapshot of {} bytes", link.largest);
    assert!(world.stats().deferred > 0, "the budget was meant to bind");
    assert!(worst_wait <= 5, "an entity waited {worst_wait} ticks");
    let bytes_per_tick = world.stats().bytes / 600;
    assert!(bytes_per_tick <= 420, "{bytes_per_tick} bytes a tick");
}

/// A viewer that acknowledges nothing: memory stays within the history, and once its mirror
/// may no longer hold the last acknowledged view it is sent full states, which apply.
#[test]
fn a_viewer_that_stops_acknowledging_gets_full_states_within_bounded_memory() {
    let config = ReplicationConfig {
        history: 8,
        ..ReplicationConfig::default()
    };
    let mut world = world(config);
    let ids: Vec<_> = (0..50)
        .map(|n| world.spawn(runner(n as f32, 0.0, "n")).unwrap())
        .collect();
    world.add_viewer(ViewerId(1));
    let mut mirror = Mirror::<Entity>::new();
    let mut baselines = Vec::new();
    for tick in 1..=100u32 {
        for &id in &ids {
            world.kind_mut::<Runner>(id).unwrap().position[1] = tick as f32;
        }
        let mut sent = Vec::new();
        world.snapshots(tick, |_, bytes| sent.push(bytes.to_vec()));
        // Bit 32 of a snapshot: whether it is a delta.
        baselines.push(sent[0][4] & 1 == 1);
        let applied = mirror.apply(&sent[0]).unwrap();
        if tick == 1 {
            world.ack(ViewerId(1), &ack_message(applied)).unwrap();
        }
        let held = world.records_held(ViewerId(1)).unwrap();
        assert!(held <= (8 + 1) * 64, "{held} records held");
    }
    assert!(baselines[1..9].iter().all(|&delta| delta));
    assert!(baselines[9..].iter().all(|&delta| !delta), "{baselines:?}");
    assert_eq!(mirror.len(), 50);
}

#[test]
fn bad_acknowledgements_are_refused_and_counted() {
    let mut world = world(ReplicationConfig::default());
    world.add_viewer(ViewerId(1));
    world.spawn(runner(1.0, 1.0, "a")).unwrap();
    world.snapshots(1, |_, _| {});
    assert!(matches!(
        world.ack(ViewerId(1), &[1, 2]),
        Err(AckError::Malformed(_))
    ));
    assert!(matches!(
        world.ack(ViewerId(1), &[1, 0, 0, 0, 9]),
        Err(AckError::Malformed(_))
    ));
    assert_eq!(
        world.ack(ViewerId(1), &ack_message(77)),
        Err(AckError::Unknown(77))
    );
    assert_eq!(
        world.ack(ViewerId(9), &ack_message(1)),
        Err(AckError::NotViewer)
    );
    assert_eq!(world.ack(ViewerId(1), &ack_message(1)), Ok(()));
    assert_eq!(
        world.ack(ViewerId(1), &ack_message(1)),
        Ok(()),
        "a repeat is harmless"
    );
    assert_eq!(world.stats().acks_refused, 4);
}

#[test]
fn a_value_outside_its_bounds_is_counted_not_sent() {
    let mut world = world(ReplicationConfig::default());
    let mut link = Link::new(1, &[1], &mut world);
    let good = world.spawn(runner(1.0, 1.0, "ok")).unwrap();
    let bad = world.spawn(runner(1.0, 1.0, "bad")).unwrap();
    world.kind_mut::<Runner>(bad).unwrap().health = 101;
    link.step(&mut world, 1);
    assert_eq!(world.stats().unencodable, 1);
    assert_eq!(
        link.clients[0]
            .mirror
            .iter()
            .map(|(id, _)| id)
            .collect::<Vec<_>>(),
        [good]
    );
    world.kind_mut::<Runner>(bad).unwrap().health = 100;
    link.step(&mut world, 2);
    assert_mirrors(&world, &link.clients[0], [good, bad]);
}

#[test]
fn a_reconnected_viewer_is_sent_the_full_state() {
    let mut world = world(ReplicationConfig::default());
    let mut link = Link::new(1, &[1], &mut world);
    let ids: Vec<_> = (0..5)
        .map(|n| world.spawn(runner(n as f32, 0.0, "n")).unwrap())
        .collect();
    link.step(&mut world, 1);
    link.step(&mut world, 2);
    world.reset_viewer(ViewerId(1));
    link.clients[0].mirror.clear();
    link.step(&mut world, 3);
    assert_mirrors(&world, &link.clients[0], ids.iter().copied());
}

#[test]
fn a_kind_change_under_one_id_is_a_remove_and_an_add() {
    let mut world = world(ReplicationConfig::default());
    let mut link = Link::new(1, &[1], &mut world);
    let id = world.spawn(runner(1.0, 1.0, "a")).unwrap();
    link.step(&mut world, 1);
    *world.get_mut(id).unwrap() = Entity::Score(Score { red: 3, blue: 4 });
    link.step(&mut world, 2);
    assert_eq!(
        link.clients[0].mirror.changes(),
        &[Change::Removed(id), Change::Added(id)]
    );
    assert_eq!(
        link.clients[0].mirror.get(id),
        Some(&Entity::Score(Score { red: 3, blue: 4 }))
    );
}

#[test]
fn a_despawned_id_rests_before_it_is_reused() {
    let mut world = world(ReplicationConfig::default());
    let first = world.spawn(runner(1.0, 1.0, "a")).unwrap();
    world.snapshots(1, |_, _| {});
    world.despawn(first).unwrap();
    world.snapshots(2, |_, _| {});
    let second = world.spawn(runner(1.0, 1.0, "b")).unwrap();
    assert_ne!(first, second);
    world.snapshots(2 + 256, |_, _| {});
    world.despawn(second).unwrap();
    assert_eq!(world.spawn(runner(1.0, 1.0, "c")).unwrap(), first);
}

#[test]
fn the_mirror_refuses_stale_snapshots_and_missing_baselines() {
    let mut world = world(ReplicationConfig::default());
    world.add_viewer(ViewerId(1));
    let id = world.spawn(runner(1.0, 1.0, "a")).unwrap();
    let mut sent = Vec::new();
    for tick in 1..=3 {
        world.kind_mut::<Runner>(id).unwrap().health = 90 + tick as u8;
        world.snapshots(tick, |_, bytes| sent.push(bytes.to_vec()));
        if tick == 1 {
            world.ack(ViewerId(1), &ack_message(1)).unwrap();
        }
    }
    let mut mirror = Mirror::<Entity>::new();
    assert_eq!(
        mirror.apply(&sent[1]),
        Err(MirrorError::MissingBaseline {
            tick: 2,
            baseline: 1
        })
    );
    assert_eq!(mirror.apply(&sent[0]), Ok(1));
    assert_eq!(mirror.apply(&sent[2]), Ok(3));
    assert_eq!(
        mirror.apply(&sent[1]),
        Err(MirrorError::Stale { tick: 2, newest: 3 })
    );
    assert_eq!(mirror.get(id), Some(&as_seen_by(&world, id, ViewerId(1))));
    assert!(MAX_HISTORY >= world.config().history);
}

/// The profile says what the bytes carried: a moving crowd's positions cost the most, a
/// score that changes once a tick little, and the estimate adds up to what was sent.
#[test]
fn the_profile_accounts_for_the_bytes_by_kind_and_field() {
    let mut world = world(ReplicationConfig::default());
    let mut link = Link::new(1, &[1, 2], &mut world);
    world.set_member(0, ViewerId(1), "ada", true);
    let ids: Vec<_> = (0..20)
        .map(|n| world.spawn(runner(n as f32, 1.0, "runner")).unwrap())
        .collect();
    let score = world.spawn(Score::default()).unwrap();
    for tick in 1..=400u32 {
        for &id in &ids {
            world.kind_mut::<Runner>(id).unwrap().position[1] = (tick % 200) as f32 * 0.5;
        }
        world.kind_mut::<Score>(score).unwrap().red += 1;
        link.step(&mut world, tick);
    }
    let profile = world.take_profile().unwrap();
    assert_eq!(profile.snapshots, 800);
    let field = |kind: usize, name: &str| {
        profile.kinds[kind]
            .fields
            .iter()
            .find(|(field, _)| *field == name)
            .unwrap()
            .1
    };
    assert!(
        field(0, "position") > 10.0 * field(0, "name"),
        "{profile:?}"
    );
    assert!(field(0, "position") > 10.0 * field(1, "red"), "{profile:?}");
    // Never changed: sent in the two creates alone (the first send, measured, counts 8 times).
    assert!(field(1, "blue") <= 2.0 * 8.0, "{profile:?}");
    assert!(profile.roster.total_bytes() > 0.0);
    let sent = world.stats().bytes as f64;
    let estimated = profile.total_bytes();
    assert!(
        (estimated - sent).abs() < 0.1 * sent,
        "estimated {estimated:.0} bytes of {sent:.0} sent"
    );
    assert_eq!(world.take_profile(), None, "taken: nothing since");
}

mod hostile {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any bytes: an error or a snapshot, never a panic, and a refused one changes
        /// nothing.
        #[test]
        fn random_bytes_never_panic_the_mirror(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut mirror = Mirror::<Entity>::new();
            let before = mirror.len();
            if mirror.apply(&bytes).is_err() {
                prop_assert_eq!(mirror.len(), before);
                prop_assert_eq!(mirror.tick(), None);
            }
        }

        /// A real snapshot with bits flipped: an error or a snapshot, never a panic.
        #[test]
        fn corrupted_snapshots_never_panic_the_mirror(flips in proptest::collection::vec((0usize..2000, 0u8..8), 1..6)) {
            let mut world = world(ReplicationConfig::default());
            world.add_viewer(ViewerId(1));
            for n in 0..20 {
                world.spawn(runner(n as f32, 3.0, "someone")).unwrap();
            }
            let mut mirror = Mirror::<Entity>::new();
            let mut first = Vec::new();
            world.snapshots(1, |_, bytes| first = bytes.to_vec());
            mirror.apply(&first).unwrap();
            world.ack(ViewerId(1), &ack_message(1)).unwrap();
            for (_, entity) in world.iter_mut() {
                if let Entity::Runner(runner) = entity {
                    runner.position[1] = 9.0;
                }
            }
            let mut second = Vec::new();
            world.snapshots(2, |_, bytes| second = bytes.to_vec());
            for (byte, bit) in flips {
                let len = second.len();
                second[byte % len] ^= 1 << bit;
            }
            let _ = mirror.apply(&second);
        }
    }
}
