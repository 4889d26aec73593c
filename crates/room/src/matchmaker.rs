//! Matchmaking: where a player who asks to play goes. Sans-IO placement logic, kept by the
//! HTTP side: it knows every room's kind, shard and occupancy, reserves a seat before a
//! connect token is issued (so concurrent requests cannot overfill a room), and places new
//! rooms on the least loaded shard. A room's lock, label and metadata are the room's (its
//! shard reports them, [`Matchmaker::listed`]); a locked room is never offered, and
//! join-or-create offers only rooms whose label matches the request's filter.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::listing::{LabelFilter, Listing};
use crate::room::PlayerId;
use crate::shard::RoomId;

/// What a player asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatchRequest {
    /// Any open room of this kind with a free seat whose label matches `filter`, or a new
    /// one.
    JoinOrCreate {
        /// Room kind (`relay`, `chat`, `arena`, …).
        kind: String,
        /// Which rooms qualify (`label.mode = "ranked"`); empty for any.
        filter: LabelFilter,
    },
    /// A particular room.
    Join {
        /// Which.
        room: RoomId,
    },
    /// A new room of this kind, whatever rooms are open (a private match, a load test
    /// spreading its players over rooms).
    Create {
        /// Room kind.
        kind: String,
    },
}

/// Where a player goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The room.
    pub room: RoomId,
    /// The room's kind.
    pub kind: String,
    /// The shard that hosts it.
    pub shard: usize,
    /// True when the runtime must create the room on that shard first.
    pub create: bool,
}

/// Why a player could not be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    /// The server is draining and takes no new players.
    #[error("server is draining")]
    Draining,
    /// No room with that id.
    #[error("no room {0}")]
    NoSuchRoom(RoomId),
    /// The room has no free seat.
    #[error("room {0} is full")]
    RoomFull(RoomId),
    /// The room is locked: it takes no new players.
    #[error("room {0} is locked")]
    RoomLocked(RoomId),
    /// The room kind is not one this server hosts.
    #[error("unknown room kind {0:?}")]
    UnknownKind(String),
    /// The player already holds a seat or a reservation.
    #[error("player already placed in room {0}")]
    AlreadyPlaced(RoomId),
}

#[derive(Debug, Clone)]
struct RoomEntry {
    kind: String,
    shard: usize,
    capacity: u16,
    /// Players seated, as the shards last reported.
    seated: u16,
    /// Lock, label and metadata, as the room's shard last reported.
    listing: Listing,
}

/// A room as matchmaking and listings see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedRoom {
    /// Its id.
    pub id: RoomId,
    /// Its kind.
    pub kind: String,
    /// Players seated (connected, or holding their seat while they reconnect).
    pub seated: u16,
    /// Seats promised to players matchmaking placed who have not connected yet
    /// (reservations that have not expired).
    pub reserved: u16,
    /// Seats.
    pub capacity: u16,
    /// Lock, label and metadata.
    pub listing: Listing,
}

#[derive(Debug, Clone, Copy)]
struct Reservation {
    room: RoomId,
    expires: Instant,
}

/// The HTTP side's view of every room, and the seats it has promised.
#[derive(Debug)]
pub struct Matchmaker {
    kinds: HashMap<String, u16>,
    shards: usize,
    rooms: BTreeMap<RoomId, RoomEntry>,
    reservations: HashMap<PlayerId, Reservation>,
    /// Where placed players sit, once their shard confirms them.
    seated: HashMap<PlayerId, RoomId>,
    next_room: u64,
    reservation_ttl: Duration,
    draining: bool,
}

impl Matchmaker {
    /// A matchmaker for `shards` shards hosting the room `kinds` (name and capacity). A
    /// reservation lasts `reservation_ttl`: the time a client has to connect with its token.
    pub fn new(
        shards: usize,
        kinds: impl IntoIterator<Item = (String, u16)>,
        reservation_ttl: Duration,
    ) -> Self {
        Self {
            kinds: kinds.into_iter().collect(),
            shards: shards.max(1),
            rooms: BTreeMap::new(),
            reservations: HashMap::new(),
            seated: HashMap::new(),
            next_room: 1,
            reservation_ttl,
            draining: false,
        }
    }

    /// Numbers new rooms from `first` on (when it is past the next number): a node of a
    /// cluster takes a range of its own, so room ids are unique across the cluster.
    pub fn number_rooms_from(&mut self, first: u64) {
        self.next_room = self.next_room.max(first);
    }

    /// Every room: id, kind, shard, players seated (reservations not counted), capacity.
    pub fn room_entries(&self) -> impl Iterator<Item = (RoomId, &str, usize, u16, u16)> + '_ {
        self.rooms.iter().map(|(id, entry)| {
            (
                *id,
                entry.kind.as_str(),
                entry.shard,
                entry.seated,
                entry.capacity,
            )
        })
    }

    /// `room`'s lock, label and metadata as its shard last reported them.
    pub fn listing(&self, room: RoomId) -> Option<&Listing> {
        self.rooms.get(&room).map(|entry| &entry.listing)
    }

    /// Whether `room` is locked (never offered); false for a room not listed here.
    pub fn is_locked(&self, room: RoomId) -> bool {
        self.rooms
            .get(&room)
            .is_some_and(|entry| entry.listing.locked)
    }

    /// Every seated player and their room.
    pub fn seated_players(&self) -> impl Iterator<Item = (PlayerId, RoomId)> + '_ {
        self.seated.iter().map(|(player, room)| (*player, *room))
    }

    /// Players seated in `room`, reservations not counted.
    pub fn seated_in(&self, room: RoomId) -> Option<u16> {
        self.rooms.get(&room).map(|entry| entry.seated)
    }

    /// Stops placing players (drain); rooms in progress continue.
    pub fn drain(&mut self) {
        self.draining = true;
    }

    /// Whether [`drain`](Self::drain) was called.
    pub fn is_draining(&self) -> bool {
        self.draining
    }

    /// Seats in `room` promised to players who have not connected yet.
    pub fn reserved_in(&self, room: RoomId, now: Instant) -> u16 {
        let count = self
            .reservations
            .values()
            .filter(|reservation| reservation.room == room && reservation.expires > now)
            .count();
        u16::try_from(count).unwrap_or(u16::MAX)
    }

    fn free_seats(&self, id: RoomId, entry: &RoomEntry, now: Instant) -> u16 {
        entry
            .capacity
            .saturating_sub(entry.seated)
            .saturating_sub(self.reserved_in(id, now))
    }

    /// Places `player` and reserves their seat until they connect or the reservation expires.
    pub fn place(
        &mut self,
        now: Instant,
        player: PlayerId,
        request: &MatchRequest,
    ) -> Result<Placement, MatchError> {
        if self.draining {
            return Err(MatchError::Draining);
        }
        self.expire(now);
        if let Some(room) = self.seated.get(&player) {
            return Err(MatchError::AlreadyPlaced(*room));
        }
        if let Some(reservation) = self.reservations.get(&player) {
            return Err(MatchError::AlreadyPlaced(reservation.room));
        }
        let placement = match request {
            MatchRequest::Join { room } => {
                let entry = self.rooms.get(room).ok_or(MatchError::NoSuchRoom(*room))?;
                if entry.listing.locked {
                    return Err(MatchError::RoomLocked(*room));
                }
                if self.free_seats(*room, entry, now) == 0 {
                    return Err(MatchError::RoomFull(*room));
                }
                Placement {
                    room: *room,
                    kind: entry.kind.clone(),
                    shard: entry.shard,
                    create: false,
                }
            }
            MatchRequest::JoinOrCreate { kind, filter } => {
                let capacity = *self
                    .kinds
                    .get(kind)
                    .ok_or_else(|| MatchError::UnknownKind(kind.clone()))?;
                // Fill the fullest room that still has a seat: players meet players.
                let best = self
                    .rooms
                    .iter()
                    .filter(|(_, entry)| {
                        entry.kind == *kind
                            && !entry.listing.locked
                            && filter.matches(&entry.listing.label)
                    })
                    .map(|(id, entry)| (*id, entry, self.free_seats(*id, entry, now)))
                    .filter(|(_, _, free)| *free > 0)
                    .min_by_key(|(id, _, free)| (*free, *id));
                match best {
                    Some((room, entry, _)) => Placement {
                        room,
                        kind: kind.clone(),
                        shard: entry.shard,
                        create: false,
                    },
                    None => self.create_room(kind, capacity),
                }
            }
            MatchRequest::Create { kind } => {
                let capacity = *self
                    .kinds
                    .get(kind)
                    .ok_or_else(|| MatchError::UnknownKind(kind.clone()))?;
                self.create_room(kind, capacity)
            }
        };
        self.reservations.insert(
            player,
            Reservation {
                room: placement.room,
                expires: now + self.reservation_ttl,
            },
        );
        Ok(placement)
    }

    fn create_room(&mut self, kind: &str, capacity: u16) -> Placement {
        let room = RoomId(self.next_room);
        self.next_room += 1;
        let mut load = vec![0usize; self.shards];
        for entry in self.rooms.values() {
            load[entry.shard] += usize::from(entry.seated).max(1);
        }
        let shard = (0..self.shards)
            .min_by_key(|shard| (load[*shard], *shard))
            .unwrap_or(0);
        self.rooms.insert(
            room,
            RoomEntry {
                kind: kind.to_string(),
                shard,
                capacity,
                seated: 0,
                listing: Listing::default(),
            },
        );
        Placement {
            room,
            kind: kind.to_string(),
            shard,
            create: true,
        }
    }

    /// The shard seated a player: their reservation becomes a seat.
    pub fn joined(&mut self, player: PlayerId, room: RoomId) {
        self.reservations.remove(&player);
        if let Some(entry) = self.rooms.get_mut(&room) {
            entry.seated = entry.seated.saturating_add(1);
        }
        self.seated.insert(player, room);
    }

    /// A player left their room for good.
    pub fn left(&mut self, player: PlayerId) {
        if let Some(room) = self.seated.remove(&player)
            && let Some(entry) = self.rooms.get_mut(&room)
        {
            entry.seated = entry.seated.saturating_sub(1);
        }
    }

    /// A room's shard reported its lock, label or metadata.
    pub fn listed(&mut self, room: RoomId, listing: Listing) {
        if let Some(entry) = self.rooms.get_mut(&room) {
            entry.listing = listing;
        }
    }

    /// A shard disposed of a room.
    pub fn room_closed(&mut self, room: RoomId) {
        self.rooms.remove(&room);
        self.reservations
            .retain(|_, reservation| reservation.room != room);
        self.seated.retain(|_, seated| *seated != room);
    }

    /// The room a player holds a seat in, its shard and kind, for reconnection: they get
    /// a fresh token for it.
    pub fn seat_of(&self, player: PlayerId) -> Option<(RoomId, usize, String)> {
        let room = self.seated.get(&player)?;
        let entry = self.rooms.get(room)?;
        Some((*room, entry.shard, entry.kind.clone()))
    }

    /// The room a player was placed in but has not connected to yet, its shard and kind:
    /// a client asking again (a reloaded page) gets a new token for the same seat.
    pub fn reservation_of(
        &self,
        now: Instant,
        player: PlayerId,
    ) -> Option<(RoomId, usize, String)> {
        let room = self
            .reservations
            .get(&player)
            .filter(|reservation| reservation.expires > now)?
            .room;
        let entry = self.rooms.get(&room)?;
        Some((room, entry.shard, entry.kind.clone()))
    }

    /// The shard hosting a room.
    pub fn shard_of(&self, room: RoomId) -> Option<usize> {
        self.rooms.get(&room).map(|entry| entry.shard)
    }

    /// Players seated or holding a reservation that has not expired.
    pub fn placed(&self, now: Instant) -> usize {
        let reserved = self
            .reservations
            .values()
            .filter(|reservation| reservation.expires > now)
            .count();
        self.seated.len() + reserved
    }

    /// Drops reservations whose clients never connected.
    pub fn expire(&mut self, now: Instant) {
        self.reservations
            .retain(|_, reservation| reservation.expires > now);
    }

    /// Rooms as the matchmaker sees them, those whose label matches `filter`, by id.
    pub fn rooms(&self, now: Instant, filter: &LabelFilter) -> Vec<ListedRoom> {
        self.rooms
            .iter()
            .filter(|(_, entry)| filter.matches(&entry.listing.label))
            .map(|(id, entry)| ListedRoom {
                id: *id,
                kind: entry.kind.clone(),
                seated: entry.seated,
                reserved: self.reserved_in(*id, now),
                capacity: entry.capacity,
                listing: entry.listing.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matchmaker(shards: usize) -> (Matchmaker, Instant) {
        let kinds = [("relay".to_string(), 4), ("chat".to_string(), 100)];
        (
            Matchmaker::new(shards, kinds, Duration::from_secs(10)),
            Instant::now(),
        )
    }

    fn relay() -> MatchRequest {
        MatchRequest::JoinOrCreate {
            kind: "relay".into(),
            filter: LabelFilter::default(),
        }
    }

    #[test]
    fn players_fill_a_room_before_a_new_one_opens() {
        let (mut mm, now) = matchmaker(2);
        let first = mm.place(now, PlayerId(1), &relay()).unwrap();
        assert!(first.create);
        for id in 2..=4 {
            let placement = mm.place(now, PlayerId(id), &relay()).unwrap();
            assert_eq!(
                (placement.room, placement.create),
                (first.room, false),
                "player {id}"
            );
        }
        let fifth = mm.place(now, PlayerId(5), &relay()).unwrap();
        assert!(
            fifth.create,
            "the first room is full, reservations included"
        );
        assert_ne!(
            fifth.shard, first.shard,
            "the new room goes to the less loaded shard"
        );
    }

    #[test]
    fn create_opens_a_new_room_while_others_have_seats() {
        let (mut mm, now) = matchmaker(2);
        let create = MatchRequest::Create {
            kind: "relay".into(),
        };
        let first = mm.place(now, PlayerId(1), &create).unwrap();
        let second = mm.place(now, PlayerId(2), &create).unwrap();
        assert!(first.create && second.create);
        assert_ne!(first.room, second.room, "each create is a room of its own");
        let joined = mm.place(now, PlayerId(3), &relay()).unwrap();
        assert!(
            !joined.create && [first.room, second.room].contains(&joined.room),
            "join-or-create still fills the open rooms"
        );
        assert_eq!(
            mm.place(
                now,
                PlayerId(4),
                &MatchRequest::Create {
                    kind: "duel".into()
                }
            ),
            Err(MatchError::UnknownKind("duel".into()))
        );
    }

    #[test]
    fn unconfirmed_reservations_expire_and_free_their_seats() {
        let (mut mm, now) = matchmaker(1);
        let room = mm.place(now, PlayerId(1), &relay()).unwrap().room;
        for id in 2..=4 {
            mm.place(now, PlayerId(id), &MatchRequest::Join { room })
                .unwrap();
        }
        assert_eq!(
            mm.place(now, PlayerId(9), &MatchRequest::Join { room }),
            Err(MatchError::RoomFull(room))
        );
        mm.joined(PlayerId(1), room);
        let later = now + Duration::from_secs(11);
        let placement = mm
            .place(later, PlayerId(9), &MatchRequest::Join { room })
            .unwrap();
        assert_eq!(
            placement.room, room,
            "three reservations expired; one seat is taken"
        );
        let listed: Vec<_> = mm
            .rooms(later, &LabelFilter::default())
            .into_iter()
            .map(|room| {
                (
                    room.id,
                    room.kind,
                    room.seated,
                    room.reserved,
                    room.capacity,
                )
            })
            .collect();
        assert_eq!(
            listed,
            [(room, "relay".to_string(), 1, 1, 4)],
            "one seated, player 9 promised"
        );
    }

    #[test]
    fn a_player_is_placed_once_and_finds_their_seat_again() {
        let (mut mm, now) = matchmaker(1);
        let placement = mm.place(now, PlayerId(1), &relay()).unwrap();
        assert_eq!(
            mm.place(now, PlayerId(1), &relay()),
            Err(MatchError::AlreadyPlaced(placement.room))
        );
        assert_eq!(
            mm.reservation_of(now, PlayerId(1)),
            Some((placement.room, placement.shard, "relay".into()))
        );
        assert_eq!(
            mm.reservation_of(now + Duration::from_secs(10), PlayerId(1)),
            None,
            "an expired reservation is no reservation"
        );
        assert_eq!(mm.placed(now + Duration::from_secs(10)), 0);
        mm.joined(PlayerId(1), placement.room);
        assert_eq!(mm.reservation_of(now, PlayerId(1)), None);
        assert_eq!(
            mm.seat_of(PlayerId(1)),
            Some((placement.room, placement.shard, "relay".into()))
        );
        assert_eq!(mm.placed(now), 1);
        mm.left(PlayerId(1));
        assert_eq!(mm.seat_of(PlayerId(1)), None);
        assert!(mm.place(now, PlayerId(1), &relay()).is_ok());
    }

    #[test]
    fn bad_requests_and_draining_are_refused_with_their_reason() {
        let (mut mm, now) = matchmaker(1);
        assert_eq!(
            mm.place(
                now,
                PlayerId(1),
                &MatchRequest::JoinOrCreate {
                    kind: "poker".into(),
                    filter: LabelFilter::default(),
                }
            ),
            Err(MatchError::UnknownKind("poker".into()))
        );
        assert_eq!(
            mm.place(now, PlayerId(1), &MatchRequest::Join { room: RoomId(77) }),
            Err(MatchError::NoSuchRoom(RoomId(77)))
        );
        mm.drain();
        assert_eq!(
            mm.place(now, PlayerId(1), &relay()),
            Err(MatchError::Draining)
        );
    }

    #[test]
    fn rooms_can_be_numbered_from_a_range_of_their_own() {
        let (mut mm, now) = matchmaker(1);
        mm.number_rooms_from(5 << 32);
        let room = mm.place(now, PlayerId(1), &relay()).unwrap().room;
        assert_eq!(room, RoomId(5 << 32));
        mm.number_rooms_from(1);
        let create = MatchRequest::Create {
            kind: "relay".into(),
        };
        assert_eq!(
            mm.place(now, PlayerId(2), &create).unwrap().room,
            RoomId((5 << 32) + 1),
            "never back"
        );
        mm.joined(PlayerId(1), room);
        assert_eq!(mm.seated_in(room), Some(1));
        assert_eq!(
            mm.seated_players().collect::<Vec<_>>(),
            [(PlayerId(1), room)]
        );
        assert_eq!(
            mm.room_entries().map(|entry| entry.3).sum::<u16>(),
            1,
            "reservations are not seats"
        );
    }

    #[test]
    fn a_closed_room_is_forgotten_with_its_reservations() {
        let (mut mm, now) = matchmaker(1);
        let room = mm.place(now, PlayerId(1), &relay()).unwrap().room;
        mm.room_closed(room);
        assert!(mm.rooms(now, &LabelFilter::default()).is_empty());
        assert!(
            mm.place(now, PlayerId(1), &relay()).unwrap().create,
            "the reservation went with it"
        );
    }

    #[test]
    fn a_locked_room_is_never_offered_and_labels_are_filtered() {
        let (mut mm, now) = matchmaker(1);
        let first = mm.place(now, PlayerId(1), &relay()).unwrap().room;
        mm.listed(
            first,
            Listing {
                locked: true,
                ..Listing::default()
            },
        );
        assert_eq!(
            mm.place(now, PlayerId(2), &MatchRequest::Join { room: first }),
            Err(MatchError::RoomLocked(first))
        );
        let second = mm.place(now, PlayerId(2), &relay()).unwrap();
        assert!(
            second.create,
            "the locked room has seats but is not offered"
        );
        let ranked =
            crate::listing::Label::new([("mode".to_string(), "ranked".to_string())]).unwrap();
        mm.listed(
            second.room,
            Listing {
                label: ranked,
                ..Listing::default()
            },
        );
        let wants = |filter: &str| MatchRequest::JoinOrCreate {
            kind: "relay".into(),
            filter: filter.parse().unwrap(),
        };
        let casual = mm
            .place(now, PlayerId(3), &wants("label.mode = \"casual\""))
            .unwrap();
        assert!(casual.create, "no casual room yet");
        let joined = mm
            .place(now, PlayerId(4), &wants("label.mode = \"ranked\""))
            .unwrap();
        assert_eq!((joined.room, joined.create), (second.room, false));
        let listed = mm.rooms(now, &"label.mode = ranked".parse().unwrap());
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, second.room);
        mm.listed(first, Listing::default());
        assert!(
            mm.place(now, PlayerId(5), &MatchRequest::Join { room: first })
                .is_ok(),
            "unlocked, it is offered again"
        );
    }
}
