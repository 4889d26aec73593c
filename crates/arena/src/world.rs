//! The simulation: players and bullets on a map, advanced one fixed step at a time.
//!
//! # Driving a world
//!
//! Sans-IO: nothing here reads a clock or the network. Whoever owns the world (the room
//! adapter) calls, in any order between steps, [`World::join`], [`World::leave`] and
//! [`World::handle_input`]; then once per tick [`World::step`]; then [`World::poll_event`]
//! until it returns `None` (events wait in a queue until polled). State for snapshots is read
//! through [`World::players`], [`World::bullets`] and [`World::players_near`].
//!
//! # One step, in order
//!
//! 1. The tick counter advances; dead players whose delay is over respawn.
//! 2. Each player's merged input is applied: movement through
//!    [`step_movement`](crate::movement::step_movement), aim, and whether fire was pressed.
//! 3. Players push apart: every overlapping pair (found through the grid, its cells copied
//!    out once per step so that a crowd's neighbourhoods are read from contiguous runs;
//!    [`SpatialGrid::pack`]) contributes half
//!    of `separation_stiffness × overlap` to each side; a player's total push is capped at
//!    `max_push` and then walls push the player back out (Jacobi style, so the result does
//!    not depend on which pair is visited first).
//! 4. Players on a teleport pad move to a random point of its destination (seeded RNG), and
//!    so do players who pressed warp ([`InputCommand::WARP`]) and whose warp has cooled
//!    down, through the pad nearest to them (seed 003's burst of teleport requests).
//!    Overlap at the destination is not avoided: step 3 spreads a crowd over the next ticks,
//!    at most `max_push` per player per tick. Each teleport is an O(1) grid move, so 5,000
//!    players landing in one 200 m² zone in one tick is 5,000 cheap updates; the following
//!    ticks pay for the crowd's separation, which the grid keeps proportional to each
//!    player's neighbours. Warps pressed too soon are counted and dropped.
//! 5. Players who pressed fire and whose weapon is ready fire from their centre along their
//!    aim; presses while not ready are counted and dropped.
//! 6. Bullets move, swept against walls and players (never the shooter); the first thing
//!    met along the path stops the bullet; out of range or off the map, it vanishes. Hits take health; the last one kills, and the
//!    victim respawns after `respawn_delay_ticks`.
//!
//! Everything iterates in a fixed order (player slots, bullet slots, grid lists), and the
//! only randomness is the world's own ChaCha8 generator seeded at creation, so the same seed
//! and the same calls give the same world bit for bit.
//!
//! # Allocation
//!
//! A step allocates nothing once the world has warmed up: buffers are kept between steps,
//! the bullet list is reserved for the most bullets the players can have in flight, and the
//! event queue keeps its capacity as long as events are polled.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::{ConfigError, WorldConfig};
use crate::event::GameEvent;
use crate::geom::{Aabb, Vec2};
use crate::input::{InputCommand, InputError, InputStats, PendingInput};
use crate::map::ArenaMap;
use crate::movement::{self, MovementParams};
use crate::physics::contact::circle_circle;
use crate::physics::sweep::{segment_aabb, segment_circle};
use crate::physics::{PackedCells, SpatialGrid};
use crate::player::{Bullet, Player, PlayerKey, PlayerStats};

/// Most grid cells a world may allocate (about 16 MB of cell heads); a smaller
/// `grid_cell_size` on a large map is refused.
const MAX_GRID_CELLS: u64 = 1 << 22;

/// A player could not join.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// A player with this key is already in the world.
    #[error("player {0} is already in the world")]
    AlreadyJoined(PlayerKey),
}

/// A player could not be placed.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum PlaceError {
    /// No player with this key is in the world.
    #[error("no player {0} in the world")]
    UnknownPlayer(PlayerKey),
    /// The position is NaN or infinite.
    #[error("position ({}, {}) is not finite", .0.x, .0.y)]
    NotFinite(Vec2),
}

/// The arena simulation. See the [module docs](self) for the order of a step.
///
/// ```
/// use std::sync::Arc;
/// use tickwire_arena::{BuiltinMap, InputCommand, PlayerKey, World, WorldConfig};
///
/// let map = Arc::new(BuiltinMap::Courtyard.load()?);
/// let mut world = World::new(map, WorldConfig::default(), 42)?;
/// let alice = PlayerKey(1);
/// let start = world.join(alice)?;
/// let right = InputCommand { sequence: 0, move_x: 1.0, ..InputCommand::default() };
/// world.step(&[(alice, right)]);
/// let player = world.player(alice).unwrap();
/// assert!(player.position().x > start.x);
/// assert_eq!(player.last_input_sequence(), Some(0));
/// while let Some(event) = world.poll_event() {
///     println!("{event:?}");
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct World {
    map: Arc<ArenaMap>,
    config: WorldConfig,
    movement: MovementParams,
    bullet_lifetime: u32,
    tick: u64,
    rng: ChaCha8Rng,
    /// Dense: a leaving player's slot is filled by the last player.
    players: Vec<Player>,
    slots: HashMap<PlayerKey, u32, BuildHasherDefault<KeyHasher>>,
    /// Alive players by slot.
    grid: SpatialGrid,
    bullets: Vec<Bullet>,
    events: VecDeque<GameEvent>,
    input_stats: InputStats,
    /// Scratch kept between steps so that a step does not allocate.
    walls_near: Vec<u32>,
    pushes: Vec<Vec2>,
    /// The grid's players cell by cell, each beside its position, for the separation pass.
    packed: PackedCells<Vec2>,
    /// Per slot: the buttons pressed since the last step ([`InputCommand::BUTTONS`]).
    pressed: Vec<u8>,
}

impl World {
    /// An empty world on `map`; `seed` drives every random choice (spawn points, teleport
    /// landings).
    pub fn new(map: Arc<ArenaMap>, config: WorldConfig, seed: u64) -> Result<Self, ConfigError> {
        config.validate()?;
        let size = map.size();
        let cells = (f64::from(size.x) / f64::from(config.grid_cell_size)).ceil()
            * (f64::from(size.y) / f64::from(config.grid_cell_size)).ceil();
        if cells > MAX_GRID_CELLS as f64 {
            return Err(ConfigError {
                field: "grid_cell_size",
                value: config.grid_cell_size.to_string(),
                reason: "makes more than 4M grid cells on this map",
            });
        }
        // Grows to the most walls one query has listed (a handful), not to every wall of
        // the map: the courtyard's 1,200 were 4.8 KB a room, 160 bytes a player of 30.
        let walls_near = Vec::new();
        Ok(Self {
            movement: config.movement_params(size),
            bullet_lifetime: config.bullet_lifetime_ticks(),
            grid: SpatialGrid::new(size, config.grid_cell_size),
            map,
            config,
            tick: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            players: Vec::new(),
            slots: HashMap::default(),
            bullets: Vec::new(),
            events: VecDeque::new(),
            input_stats: InputStats::default(),
            walls_near,
            pushes: Vec::new(),
            packed: PackedCells::default(),
            pressed: Vec::new(),
        })
    }

    /// The map.
    pub fn map(&self) -> &Arc<ArenaMap> {
        &self.map
    }

    /// The tunables.
    pub fn config(&self) -> &WorldConfig {
        &self.config
    }

    /// What a client needs to predict its own movement exactly as the server does.
    pub fn movement_params(&self) -> MovementParams {
        self.movement
    }

    /// Steps taken so far.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// Every player, alive or dead, in slot order. A slot index is stable until the next
    /// [`World::leave`].
    pub fn players(&self) -> &[Player] {
        &self.players
    }

    /// A player by key.
    pub fn player(&self, key: PlayerKey) -> Option<&Player> {
        let slot = *self.slots.get(&key)?;
        Some(&self.players[slot as usize])
    }

    /// Bullets in flight.
    pub fn bullets(&self) -> &[Bullet] {
        &self.bullets
    }

    /// Input counters (accepted, merged, stale, refused by reason, fire-rate drops).
    pub fn input_stats(&self) -> &InputStats {
        &self.input_stats
    }

    /// Replaces `out` with the slots (indices into [`World::players`]) of alive players in
    /// the grid cells `area` touches: candidates for an area-of-interest filter. Reuses
    /// `out`'s allocation.
    pub fn players_near(&self, area: Aabb, out: &mut Vec<u32>) {
        self.grid.query(area, out);
    }

    /// Adds a player at a random spawn point; returns where.
    pub fn join(&mut self, key: PlayerKey) -> Result<Vec2, JoinError> {
        if self.slots.contains_key(&key) {
            return Err(JoinError::AlreadyJoined(key));
        }
        let slot = self.players.len() as u32;
        let position = self.spawn_position();
        self.players.push(Player {
            key,
            position,
            movement: Vec2::ZERO,
            aim: 0.0,
            health: self.config.max_health,
            respawn_tick: None,
            next_fire_tick: 0,
            next_warp_tick: 0,
            idle_ticks: 0,
            input: PendingInput::default(),
            stats: PlayerStats::default(),
        });
        self.slots.insert(key, slot);
        self.grid.insert(slot, position);
        // Room for everything a step can need with this many players, reserved now so that
        // steps never grow a buffer.
        let players = self.players.len();
        reserve_total(
            &mut self.bullets,
            players * self.config.bullets_per_player(),
        );
        reserve_total(&mut self.pushes, players);
        self.packed.reserve(players);
        reserve_total(&mut self.pressed, players);
        if self.events.capacity() < 2 * players {
            self.events.reserve(2 * players - self.events.len());
        }
        Ok(position)
    }

    /// Removes a player; their bullets fly on (and still credit them). Returns whether
    /// the player was in the world.
    pub fn leave(&mut self, key: PlayerKey) -> bool {
        let Some(slot) = self.slots.remove(&key) else {
            return false;
        };
        let last = self.players.len() as u32 - 1;
        self.grid.remove(slot);
        if slot != last {
            self.grid.relabel(last, slot);
            self.slots.insert(self.players[last as usize].key, slot);
        }
        self.players.swap_remove(slot as usize);
        true
    }

    /// Moves a player to `position` at once (an operator command, a scripted scenario),
    /// kept in the map and out of walls; returns where the player ended. No event; a pad
    /// there teleports the player in the next step.
    pub fn place(&mut self, key: PlayerKey, position: Vec2) -> Result<Vec2, PlaceError> {
        if !position.is_finite() {
            return Err(PlaceError::NotFinite(position));
        }
        let slot = *self.slots.get(&key).ok_or(PlaceError::UnknownPlayer(key))?;
        let position = movement::settle(
            position,
            &self.movement,
            self.map.walls(),
            &mut self.walls_near,
        );
        let player = &mut self.players[slot as usize];
        player.position = position;
        if player.is_alive() {
            self.grid.update(slot, position);
        }
        Ok(position)
    }

    /// Takes one input for the next step (see [`crate::input`] for checks and merging).
    /// Refusals are counted in [`World::input_stats`] as well as returned.
    pub fn handle_input(
        &mut self,
        key: PlayerKey,
        command: &InputCommand,
    ) -> Result<(), InputError> {
        let result = self.merge_input(key, command);
        match &result {
            Ok(true) => {
                self.input_stats.accepted += 1;
                self.input_stats.merged += 1;
            }
            Ok(false) => self.input_stats.accepted += 1,
            Err(error) => self.input_stats.count(error),
        }
        result.map(|_| ())
    }

    fn merge_input(&mut self, key: PlayerKey, command: &InputCommand) -> Result<bool, InputError> {
        let slot = *self.slots.get(&key).ok_or(InputError::UnknownPlayer(key))?;
        command.validate()?;
        self.players[slot as usize].input.merge(command)
    }

    /// Takes `inputs` (as [`World::handle_input`] does, refusals counted) and advances the
    /// world one fixed step. Events wait for [`World::poll_event`].
    pub fn step(&mut self, inputs: &[(PlayerKey, InputCommand)]) {
        for (key, command) in inputs {
            // Refusals are counted; a driver wanting each reason calls handle_input itself.
            let _ = self.handle_input(*key, command);
        }
        self.tick += 1;
        self.respawn_due();
        self.apply_inputs();
        self.separate_players();
        self.teleport();
        self.fire();
        self.advance_bullets();
    }

    /// The next event from past steps, oldest first.
    pub fn poll_event(&mut self) -> Option<GameEvent> {
        self.events.pop_front()
    }

    /// Events waiting to be polled.
    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    /// A hash of the simulation state (tick, players, bullets) for determinism checks and
    /// desync logs: equal worlds hash equal, and any difference in a position's bits almost
    /// surely shows.
    pub fn checksum(&self) -> u64 {
        let mut hash = Fnv::default();
        hash.write_u64(self.tick);
        for player in &self.players {
            hash.write_u64(player.key.0);
            hash.write_u32(player.position.x.to_bits());
            hash.write_u32(player.position.y.to_bits());
            hash.write_u32(player.aim.to_bits());
            hash.write_u32(u32::from(player.health));
            hash.write_u64(player.respawn_tick.unwrap_or(u64::MAX));
        }
        for bullet in &self.bullets {
            hash.write_u64(bullet.owner.0);
            hash.write_u32(bullet.position.x.to_bits());
            hash.write_u32(bullet.position.y.to_bits());
        }
        hash.finish()
    }

    /// Checks the world's internal consistency: the key index, the grid (exactly the alive
    /// players, each in the cell of its position) and that no alive player's centre is inside
    /// a wall. O(players + cells); for tests and debugging.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.slots.len() != self.players.len() {
            return Err(format!(
                "{} keys indexed for {} players",
                self.slots.len(),
                self.players.len()
            ));
        }
        for (slot, player) in self.players.iter().enumerate() {
            if self.slots.get(&player.key) != Some(&(slot as u32)) {
                return Err(format!(
                    "player {} in slot {slot} is indexed elsewhere",
                    player.key
                ));
            }
            if player.is_alive() {
                let inside = self
                    .map
                    .walls()
                    .boxes()
                    .iter()
                    .find(|wall| wall.expanded(-1e-3).contains(player.position));
                if let Some(wall) = inside {
                    return Err(format!(
                        "player {} at {:?} is inside wall {wall:?}",
                        player.key, player.position
                    ));
                }
            }
        }
        self.grid.check(
            self.players
                .iter()
                .enumerate()
                .filter(|(_, player)| player.is_alive())
                .map(|(slot, player)| (slot as u32, player.position)),
        )
    }

    /// A random spawn point, jittered, settled out of walls.
    fn spawn_position(&mut self) -> Vec2 {
        let spawns = self.map.spawns();
        let spawn = spawns[self.rng.random_range(0..spawns.len())];
        let jitter = self.config.spawn_jitter;
        let offset = if jitter > 0.0 {
            Vec2::new(
                self.rng.random_range(-jitter..=jitter),
                self.rng.random_range(-jitter..=jitter),
            )
        } else {
            Vec2::ZERO
        };
        movement::settle(
            spawn + offset,
            &self.movement,
            self.map.walls(),
            &mut self.walls_near,
        )
    }

    fn respawn_due(&mut self) {
        for slot in 0..self.players.len() {
            match self.players[slot].respawn_tick {
                Some(due) if due <= self.tick => {}
                _ => continue,
            }
            let position = self.spawn_position();
            let player = &mut self.players[slot];
            player.respawn_tick = None;
            player.health = self.config.max_health;
            player.position = position;
            player.movement = Vec2::ZERO;
            self.grid.insert(slot as u32, position);
            self.events.push_back(GameEvent::Respawn {
                player: player.key,
                position,
            });
        }
    }

    fn apply_inputs(&mut self) {
        self.pressed.clear();
        self.pressed.resize(self.players.len(), 0);
        let walls = self.map.walls();
        for (slot, player) in self.players.iter_mut().enumerate() {
            let taken = player.input.take();
            match taken.newest {
                Some(command) => {
                    player.movement = command.movement();
                    player.aim = command.aim;
                    player.idle_ticks = 0;
                }
                None => {
                    player.idle_ticks = player.idle_ticks.saturating_add(1);
                    if player.idle_ticks >= self.config.idle_stop_ticks {
                        player.movement = Vec2::ZERO;
                    }
                }
            }
            if !player.is_alive() {
                continue;
            }
            self.pressed[slot] = taken.pressed;
            if player.movement == Vec2::ZERO {
                continue;
            }
            let moved = movement::step_movement(
                player.position,
                player.movement,
                &self.movement,
                walls,
                &mut self.walls_near,
            );
            if moved != player.position {
                player.position = moved;
                self.grid.update(slot as u32, moved);
            }
        }
    }

    fn separate_players(&mut self) {
        let radius = self.config.player_radius;
        let share = self.config.separation_stiffness * 0.5;
        self.pushes.clear();
        self.pushes.resize(self.players.len(), Vec2::ZERO);
        // The players cell by cell beside their positions: in a packed crowd each looks at
        // a hundred neighbours, read from one run per cell instead of following a list
        // (the step of 5,000 players just landed on the plaza: 4.6 → 2.8 ms). Same order
        // as the grid's lists, so the pushes add up bit for bit as they did.
        let players = &self.players;
        self.grid
            .pack(|slot| players[slot as usize].position, &mut self.packed);
        let pushes = &mut self.pushes;
        let mut any = false;
        for (slot, player) in self.players.iter().enumerate() {
            if !player.is_alive() {
                continue;
            }
            let position = player.position;
            let slot = slot as u32;
            self.grid.for_each_packed(
                &self.packed,
                Aabb::around_circle(position, 2.0 * radius),
                |other, other_position| {
                    // Each pair once, from its lower slot.
                    if other <= slot {
                        return;
                    }
                    if let Some(mut contact) =
                        circle_circle(position, radius, other_position, radius)
                    {
                        if other_position == position {
                            // Stacked exactly (placed or landed on one spot): one fixed
                            // direction for every pair would spread a pile along a line,
                            // where it jams; a direction per pair spreads it in the plane.
                            contact.normal = stacked_pair_normal(slot, other);
                        }
                        let push = contact.normal * (contact.depth * share);
                        pushes[slot as usize] += push;
                        pushes[other as usize] -= push;
                        any = true;
                    }
                },
            );
        }
        if !any {
            return;
        }
        let walls = self.map.walls();
        for (slot, player) in self.players.iter_mut().enumerate() {
            let push = self.pushes[slot];
            if push == Vec2::ZERO {
                continue;
            }
            let pushed = player.position + push.clamp_length(self.config.max_push);
            let settled = movement::settle(pushed, &self.movement, walls, &mut self.walls_near);
            player.position = settled;
            self.grid.update(slot as u32, settled);
        }
    }

    /// Players on a pad, and players warping, go to a random point of the pad's zone.
    fn teleport(&mut self) {
        let inset = self.config.player_radius;
        for slot in 0..self.players.len() {
            let player = &self.players[slot];
            if !player.is_alive() {
                continue;
            }
            let from = player.position;
            let on_pad = self.map.teleport_at(from);
            let warp = on_pad.is_none() && self.pressed[slot] & InputCommand::WARP != 0;
            let through = match on_pad {
                Some(pad) => Some(pad),
                None if warp && self.tick < player.next_warp_tick => {
                    self.input_stats.warp_rate_limited += 1;
                    None
                }
                None if warp => self.map.teleport_nearest(from),
                None => None,
            };
            let Some((index, teleport)) = through else {
                continue;
            };
            if warp {
                self.players[slot].next_warp_tick =
                    self.tick + u64::from(self.config.warp_cooldown_ticks);
            }
            let zone = teleport.destination;
            let landing = Vec2::new(
                random_within(&mut self.rng, zone.min.x + inset, zone.max.x - inset),
                random_within(&mut self.rng, zone.min.y + inset, zone.max.y - inset),
            );
            let to = movement::settle(
                landing,
                &self.movement,
                self.map.walls(),
                &mut self.walls_near,
            );
            let player = &mut self.players[slot];
            player.position = to;
            self.grid.update(slot as u32, to);
            self.events.push_back(GameEvent::Teleported {
                player: player.key,
                teleport: index as u16,
                from,
                to,
            });
        }
    }

    fn fire(&mut self) {
        for (slot, player) in self.players.iter_mut().enumerate() {
            if self.pressed[slot] & InputCommand::FIRE == 0 || !player.is_alive() {
                continue;
            }
            if self.tick < player.next_fire_tick {
                self.input_stats.fire_rate_limited += 1;
                continue;
            }
            player.next_fire_tick = self.tick + u64::from(self.config.fire_interval_ticks);
            player.stats.shots += 1;
            self.bullets.push(Bullet {
                owner: player.key,
                position: player.position,
                velocity: Vec2::from_angle(player.aim) * self.config.bullet_speed,
                ticks_left: self.bullet_lifetime,
            });
        }
    }

    fn advance_bullets(&mut self) {
        let dt = self.movement.dt;
        let bullet_radius = self.config.bullet_radius;
        let reach = self.config.player_radius + bullet_radius;
        let mut index = 0;
        while index < self.bullets.len() {
            let bullet = self.bullets[index];
            let start = bullet.position;
            let delta = bullet.velocity * dt;
            let path = Aabb::spanning(start, start + delta);

            let walls = self.map.walls();
            walls.query(path.expanded(bullet_radius), &mut self.walls_near);
            let mut first_wall: Option<f32> = None;
            for &wall in &self.walls_near {
                let grown = walls.boxes()[wall as usize].expanded(bullet_radius);
                if let Some(t) = segment_aabb(start, delta, grown) {
                    first_wall = Some(first_wall.map_or(t, |best| best.min(t)));
                }
            }

            let players = &self.players;
            let mut first_player: Option<(f32, u32)> = None;
            self.grid.for_each(path.expanded(reach), |slot| {
                let target = &players[slot as usize];
                if target.key == bullet.owner {
                    return;
                }
                if let Some(t) = segment_circle(start, delta, target.position, reach)
                    && first_player.is_none_or(|(best, _)| t < best)
                {
                    first_player = Some((t, slot));
                }
            });

            match (first_player, first_wall) {
                (Some((t, victim)), wall) if wall.is_none_or(|wall| t <= wall) => {
                    self.bullets.swap_remove(index);
                    self.hit(bullet.owner, victim);
                }
                (_, Some(_)) => {
                    self.bullets.swap_remove(index);
                }
                _ => {
                    let bounds = Aabb::new(Vec2::ZERO, self.movement.bounds);
                    let bullet = &mut self.bullets[index];
                    bullet.position = start + delta;
                    bullet.ticks_left -= 1;
                    // Off the map (one without border walls) is as good as out of range.
                    if bullet.ticks_left == 0 || !bounds.contains(bullet.position) {
                        self.bullets.swap_remove(index);
                    } else {
                        index += 1;
                    }
                }
            }
        }
    }

    /// Applies a hit by `attacker`'s bullet on the player in `victim_slot`.
    fn hit(&mut self, attacker: PlayerKey, victim_slot: u32) {
        let damage = self.config.bullet_damage;
        let victim = &mut self.players[victim_slot as usize];
        let health = victim.health.saturating_sub(damage);
        victim.health = health;
        let victim_key = victim.key;
        let killed = health == 0;
        if killed {
            victim.respawn_tick = Some(self.tick + u64::from(self.config.respawn_delay_ticks));
            victim.stats.deaths += 1;
            victim.movement = Vec2::ZERO;
            self.grid.remove(victim_slot);
        }
        if let Some(&slot) = self.slots.get(&attacker) {
            let stats = &mut self.players[slot as usize].stats;
            stats.hits += 1;
            stats.score += self.config.score_per_hit;
            if killed {
                stats.kills += 1;
                stats.score += self.config.score_per_kill;
            }
        }
        self.events.push_back(GameEvent::Hit {
            attacker,
            victim: victim_key,
            damage,
            health,
        });
        if killed {
            self.events.push_back(GameEvent::Kill {
                killer: attacker,
                victim: victim_key,
            });
        }
    }
}

/// Grows `buffer`'s capacity to at least `total` elements.
fn reserve_total<T>(buffer: &mut Vec<T>, total: usize) {
    if buffer.capacity() < total {
        buffer.reserve(total - buffer.len());
    }
}

/// A uniform value in `min..=max`, or their midpoint if the range is empty (a zone narrower
/// than a player).
fn random_within(rng: &mut ChaCha8Rng, min: f32, max: f32) -> f32 {
    if min < max {
        rng.random_range(min..=max)
    } else {
        (min + max) * 0.5
    }
}

/// Hashes player keys and ids: they are chosen by the server, not by peers, so a
/// multiply-rotate is enough and much cheaper than SipHash on every input and snapshot.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// FNV-1a, for [`World::checksum`] (stable across runs and platforms, unlike `DefaultHasher`).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// A separation direction for two players at exactly the same spot: deterministic, and
/// different for different pairs (golden-angle steps), so a pile spreads out evenly.
fn stacked_pair_normal(slot: u32, other: u32) -> Vec2 {
    const GOLDEN_ANGLE: f32 = 2.399_963;
    let pair = slot.wrapping_mul(0x9e37_79b9) ^ other;
    Vec2::from_angle((pair % 1024) as f32 * GOLDEN_ANGLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_map() -> Arc<ArenaMap> {
        Arc::new(
            ArenaMap::new(
                "open",
                Vec2::new(40.0, 40.0),
                vec![Aabb::from_coords(30.0, 0.0, 31.0, 40.0)],
                vec![Vec2::new(5.0, 5.0)],
                Vec::new(),
            )
            .unwrap(),
        )
    }

    fn world() -> World {
        World::new(
            open_map(),
            WorldConfig {
                spawn_jitter: 0.0,
                ..WorldConfig::default()
            },
            7,
        )
        .unwrap()
    }

    fn input(sequence: u16) -> InputCommand {
        InputCommand {
            sequence,
            ..InputCommand::default()
        }
    }

    #[test]
    fn a_world_can_move_to_a_shard_thread() {
        // The room adapter lives in a `Room: Send + 'static`.
        fn assert_send<T: Send + 'static>() {}
        assert_send::<World>();
    }

    #[test]
    fn join_twice_is_refused_and_leave_keeps_slots_dense() {
        let mut world = world();
        for key in 1..=4 {
            world.join(PlayerKey(key)).unwrap();
        }
        assert_eq!(
            world.join(PlayerKey(2)),
            Err(JoinError::AlreadyJoined(PlayerKey(2)))
        );
        assert!(world.leave(PlayerKey(2)));
        assert!(!world.leave(PlayerKey(2)));
        assert_eq!(world.players().len(), 3);
        assert_eq!(
            world.players()[1].key(),
            PlayerKey(4),
            "last moved into the gap"
        );
        world.check_invariants().unwrap();
        world.place(PlayerKey(4), Vec2::new(20.0, 20.0)).unwrap();
        world.check_invariants().unwrap();
    }

    #[test]
    fn players_on_one_spot_are_pushed_apart_over_a_few_ticks() {
        let mut world = world();
        for key in 0..10 {
            world.join(PlayerKey(key)).unwrap();
        }
        for _ in 0..120 {
            world.step(&[]);
        }
        world.check_invariants().unwrap();
        let players = world.players();
        for (i, a) in players.iter().enumerate() {
            for b in &players[i + 1..] {
                let gap = (a.position() - b.position()).length();
                assert!(gap > 0.7, "{} and {} still {gap} m apart", a.key(), b.key());
            }
        }
    }

    #[test]
    fn a_pushed_player_never_enters_a_wall() {
        let mut world = world();
        // A crowd pressed against the wall at x = 30.
        for key in 0..40 {
            world.join(PlayerKey(key)).unwrap();
            world
                .place(
                    PlayerKey(key),
                    Vec2::new(29.0 + (key % 4) as f32 * 0.1, 10.0 + key as f32 * 0.05),
                )
                .unwrap();
        }
        for tick in 0..120u16 {
            let inputs: Vec<_> = (0..40)
                .map(|key| {
                    let command = InputCommand {
                        move_x: 1.0,
                        ..input(tick)
                    };
                    (PlayerKey(key), command)
                })
                .collect();
            world.step(&inputs);
            world.check_invariants().unwrap();
            for player in world.players() {
                assert!(
                    player.position().x <= 29.6 + 1e-4,
                    "{player:?} went into the wall"
                );
            }
        }
    }

    #[test]
    fn idle_players_stop_after_the_configured_ticks() {
        let mut world = world();
        let key = PlayerKey(1);
        world.join(key).unwrap();
        let command = InputCommand {
            move_y: 1.0,
            ..input(0)
        };
        world.step(&[(key, command)]);
        let mut last = world.player(key).unwrap().position();
        for tick in 1..60 {
            world.step(&[]);
            let now = world.player(key).unwrap().position();
            if tick < 30 {
                assert!(now.y > last.y, "tick {tick}: the last input repeats");
            } else {
                assert_eq!(now, last, "tick {tick}: idle, stopped");
            }
            last = now;
        }
    }

    #[test]
    fn checksum_follows_state() {
        let mut a = world();
        let mut b = world();
        a.join(PlayerKey(1)).unwrap();
        b.join(PlayerKey(1)).unwrap();
        assert_eq!(a.checksum(), b.checksum());
        b.place(PlayerKey(1), Vec2::new(9.0, 9.0)).unwrap();
        assert_ne!(a.checksum(), b.checksum());
    }
}
