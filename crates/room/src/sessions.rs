//! The session table: who each connection is and which seat is theirs. Sans-IO and generic
//! over the transports' link handle `L`, it owns the worker's [`Shard`] and is the one place
//! that decides, for a link opening, closing or sending, what happens to the player's seat.
//! The worker delivers link events and carries out the table's answers.
//!
//! A driver calls, per link event:
//!
//! 1. [`admit`](Sessions::admit) when a link opens with its token's client id, address and
//!    user data; close the [`Admission::replaced`] link (if any) with
//!    [`DisconnectReason::AlreadyConnected`]; then, if seated, [`bind`](Sessions::bind) the
//!    new link, or [`abandon`](Sessions::abandon) the seat if the transport could not attach
//!    it after all. Nothing may [`drain_outputs`](Sessions::drain_outputs) between `admit`
//!    and `bind`: what the room sends in between is routed at the next drain, to the link.
//! 2. [`message`](Sessions::message) for each message a link delivers.
//! 3. [`closed`](Sessions::closed) when a link closes by itself, saying how.
//!
//! and after every call that reaches the rooms (these, the shard's ticks, kicks,
//! announcements), [`drain_outputs`](Sessions::drain_outputs) to carry out the sends and
//! closes, now addressed to links.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::net::IpAddr;
use std::time::Instant;

use bytes::Bytes;
use tickwire_proto::DisconnectReason;
use tickwire_proto::token::USER_DATA_BYTES;

use crate::room::{LeaveReason, PlayerId};
use crate::shard::{JoinError, SeatChange, Shard, ShardOutput};
use crate::ticket::SeatTicket;

/// Hashes ids with one multiply per word instead of SipHash: every relayed message looks its
/// recipient up, and SipHash showed in the shard's profile. The keys are not a peer's choice
/// (player ids are random or the game backend's, link ids the transports'), so colliding
/// keys are not on offer to an attacker.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        // FxHash's step: the multiply spreads every input bit into the high bits, which the
        // table's probing reads.
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by ids that are not a peer's choice (see [`IdHasher`]).
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// The per-address connection count the table keeps current: asked before a new connection
/// is admitted, told when an admitted one ends. The server shares one among its threads.
pub trait AddressLimit: Send {
    /// Admits a connection from `ip`; false refuses it.
    fn try_open(&self, now: Instant, ip: IpAddr) -> bool;
    /// An admitted connection from `ip` ended.
    fn closed(&self, ip: IpAddr);
}

/// How a link ended, as its transport saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkClosed {
    /// The client said it is leaving (UDP's disconnect with reason `Requested`).
    Goodbye,
    /// The client sent a close frame (WebSocket, WebTransport) with this code, if any; see
    /// [`close_code_leaves`] for which codes give up the seat.
    Code(Option<u16>),
    /// Anything else: a timeout, a reset, a refused send. The seat is held.
    Lost,
}

impl LinkClosed {
    /// Whether the player gives up their seat, rather than is held for the reconnect grace.
    pub fn leaves(self) -> bool {
        match self {
            Self::Goodbye => true,
            Self::Code(code) => close_code_leaves(code),
            Self::Lost => false,
        }
    }
}

/// Whether a client's close frame gives up the seat. 1001 (going away: what a browser sends
/// when its page closes or reloads) and the application codes 4000–4999 other than 4001 (a
/// client that gave up on a silent server closes with 4002 and comes back) are treated as a
/// lost connection: the seat is held for the reconnection grace. No code, 1000, 4001 and
/// anything else mean the player left.
pub fn close_code_leaves(code: Option<u16>) -> bool {
    !matches!(code, Some(1001 | 4000 | 4002..=4999))
}

/// Why a connection got no seat; its `Display` is the text to tell the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The per-address limit refused the connection.
    #[error("too many connections from this address")]
    TooManyFromAddress,
    /// An unreadable ticket or a room that is gone.
    #[error("no seat for this player")]
    NoSeat,
    /// The room refused the player ([`JoinRefused`](crate::room::JoinRefused)): its
    /// reason, verbatim (a game's own text, "room is full (4 seats)", "room closed").
    #[error("{0}")]
    Room(String),
}

/// The table's answer to a link opening.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a replaced link must be closed, and a seated player's link bound"]
pub struct Admission<L> {
    /// An older link of the same player, now unlisted: close it with
    /// [`DisconnectReason::AlreadyConnected`]. Set even when the new link got no seat.
    pub replaced: Option<L>,
    /// Seated (bind the new link), or why not (refuse the new link with this).
    pub seat: Result<(), Refused>,
}

/// What the transports must do, addressed to links.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionOutput<L> {
    /// Send a message on a link.
    Send {
        /// The recipient's link.
        link: L,
        /// Channel id.
        channel: u8,
        /// The message; broadcasts share one buffer among recipients.
        message: Bytes,
    },
    /// Close a link, already unlisted, telling the client why.
    Close {
        /// Which.
        link: L,
        /// Why, as the protocol says it (WebSocket: close code `4000 +` it).
        reason: DisconnectReason,
        /// Shown to the player.
        text: String,
    },
    /// A seat changed: the matchmaker must hear of it.
    Seat(SeatChange),
}

/// Counters of the table's refusals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Connections refused a seat, for any reason.
    pub joins_refused: u64,
    /// Of those, refused by the per-address limit.
    pub refused_by_address: u64,
}

struct Session<L> {
    /// `None` between [`Sessions::admit`] and [`Sessions::bind`].
    link: Option<L>,
    /// The address counted against the per-address limit.
    ip: Option<IpAddr>,
}

/// The links, players and seats of one shard (see the module docs for the driver's calls).
/// A player has at most one link; a link belongs to at most one player.
pub struct Sessions<L> {
    shard: Shard,
    players: IdMap<PlayerId, Session<L>>,
    links: IdMap<L, PlayerId>,
    address_limit: Option<Box<dyn AddressLimit>>,
    /// Players whose links close once the shard's outputs are out (a shutdown).
    closing: Vec<(PlayerId, DisconnectReason, &'static str)>,
    stats: SessionStats,
}

impl<L: Copy + Eq + Hash> Sessions<L> {
    /// A table around `shard`, with no per-address limit.
    pub fn new(shard: Shard) -> Self {
        Self {
            shard,
            players: IdMap::default(),
            links: IdMap::default(),
            address_limit: None,
            closing: Vec::new(),
            stats: SessionStats::default(),
        }
    }

    /// Counts every link's address against `limit`.
    pub fn set_address_limit(&mut self, limit: Box<dyn AddressLimit>) {
        self.address_limit = Some(limit);
    }

    /// The rooms and seats, to read.
    pub fn shard(&self) -> &Shard {
        &self.shard
    }

    /// The rooms, to create, tick and announce to. Seats change through the table.
    pub fn shard_mut(&mut self) -> &mut Shard {
        &mut self.shard
    }

    /// A player's link opened with a token for `player` from `ip`, its user data a
    /// [`SeatTicket`]: their held seat back if they have one, else a new seat in the
    /// ticket's room. A player connected already (on any transport) is replaced: their
    /// older link is unlisted and returned to close, and the room sees them `disconnected`
    /// then `reconnected`, never leave.
    pub fn admit(
        &mut self,
        now: Instant,
        player: PlayerId,
        ip: Option<IpAddr>,
        user_data: &[u8; USER_DATA_BYTES],
    ) -> Admission<L> {
        // A newer connection from the address of the one it replaces inherits that one's
        // place in the per-address limit; any other must be admitted before the old
        // connection is closed, so a refusal never costs the player both.
        let inherits = self
            .players
            .get(&player)
            .is_some_and(|session| session.ip.is_some() && session.ip == ip);
        if !inherits
            && let (Some(limit), Some(ip)) = (&self.address_limit, ip)
            && !limit.try_open(now, ip)
        {
            self.stats.refused_by_address += 1;
            self.stats.joins_refused += 1;
            return Admission {
                replaced: None,
                seat: Err(Refused::TooManyFromAddress),
            };
        }
        let mut replaced = None;
        if let Some(older) = self.players.remove(&player) {
            if !inherits && let (Some(limit), Some(ip)) = (&self.address_limit, older.ip) {
                limit.closed(ip);
            }
            if let Some(link) = older.link {
                self.links.remove(&link);
                replaced = Some(link);
            }
            self.shard.connection_lost(now, player);
        }
        let seated = match SeatTicket::decode(user_data) {
            Some(ticket) => match self.shard.room_of(player) {
                Some(_) => match self.shard.reconnect(now, player) {
                    Some(_) => Ok(()),
                    None => Err(Refused::NoSeat),
                },
                None => match self.shard.join(now, ticket.room, player, ticket.name) {
                    Ok(_) => Ok(()),
                    // The transports cut it to a close frame's 123 bytes.
                    Err(JoinError::Refused(refused)) => Err(Refused::Room(refused.to_string())),
                    Err(_) => Err(Refused::NoSeat),
                },
            },
            None => Err(Refused::NoSeat),
        };
        if let Err(refused) = seated {
            self.stats.joins_refused += 1;
            if let (Some(limit), Some(ip)) = (&self.address_limit, ip) {
                limit.closed(ip);
            }
            return Admission {
                replaced,
                seat: Err(refused),
            };
        }
        self.players.insert(player, Session { link: None, ip });
        Admission {
            replaced,
            seat: Ok(()),
        }
    }

    /// The link of a player just seated by [`admit`](Self::admit): the room's sends go
    /// there from now on, including those it made while seating them.
    pub fn bind(&mut self, player: PlayerId, link: L) {
        if let Some(session) = self.players.get_mut(&player) {
            session.link = Some(link);
            self.links.insert(link, player);
        }
    }

    /// A player seated by [`admit`](Self::admit) whose link the transport could not attach
    /// after all: their address is counted no more and their seat is held, as for a lost
    /// connection.
    pub fn abandon(&mut self, now: Instant, player: PlayerId) {
        if self.release(player).is_some() {
            self.shard.connection_lost(now, player);
        }
    }

    /// A message on a link; dropped unless the link is a player's current one.
    pub fn message(&mut self, now: Instant, link: L, channel: u8, message: Bytes) {
        if let Some(player) = self.links.get(&link) {
            self.shard.message(now, *player, channel, message);
        }
    }

    /// A link closed by itself: the player leaves or their seat is held, as `how` says.
    /// The player, or `None` for a link the table no longer lists (replaced, kicked, or one
    /// the worker closed), which changes nothing.
    pub fn closed(&mut self, now: Instant, link: L, how: LinkClosed) -> Option<PlayerId> {
        let player = *self.links.get(&link)?;
        self.release(player);
        if how.leaves() {
            self.shard.leave(now, player, LeaveReason::Left);
        } else {
            self.shard.connection_lost(now, player);
        }
        Some(player)
    }

    /// Removes a player from their room; their link closes (with
    /// [`DisconnectReason::Kicked`]) at the next drain. False if they have no seat.
    pub fn kick(&mut self, now: Instant, player: PlayerId, reason: &str) -> bool {
        self.shard.kick(now, player, reason)
    }

    /// The server is stopping: the rooms run their last ticks and every player leaves (see
    /// [`Shard::shut_down`]); the next drain yields what the rooms sent, then a close with
    /// [`DisconnectReason::ServerShutdown`] for every link.
    pub fn shut_down(&mut self, now: Instant) {
        self.shard.shut_down(now);
        self.closing.extend(self.players.keys().map(|player| {
            (
                *player,
                DisconnectReason::ServerShutdown,
                "server shutting down",
            )
        }));
    }

    /// A player's current link.
    pub fn link_of(&self, player: PlayerId) -> Option<L> {
        self.players.get(&player)?.link
    }

    /// The player on a link.
    pub fn player_on(&self, link: L) -> Option<PlayerId> {
        self.links.get(&link).copied()
    }

    /// Players with a link.
    pub fn len(&self) -> usize {
        self.players.len()
    }

    /// Whether no player has a link.
    pub fn is_empty(&self) -> bool {
        self.players.is_empty()
    }

    /// Counters of refusals.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// What the transports must do, in order: the shard's outputs with players turned into
    /// their links (a send to a player without a link is dropped, a disconnect unlists the
    /// link and closes it), then the closes of a shutdown.
    pub fn drain_outputs(&mut self) -> Outputs<'_, L> {
        Outputs {
            shard: self.shard.drain_outputs(),
            players: &mut self.players,
            links: &mut self.links,
            address_limit: self.address_limit.as_deref(),
            closing: &mut self.closing,
        }
    }

    /// Forgets a player's link and gives back its place in the per-address limit.
    fn release(&mut self, player: PlayerId) -> Option<Option<L>> {
        release(
            &mut self.players,
            &mut self.links,
            self.address_limit.as_deref(),
            player,
        )
    }
}

fn release<L: Copy + Eq + Hash>(
    players: &mut IdMap<PlayerId, Session<L>>,
    links: &mut IdMap<L, PlayerId>,
    address_limit: Option<&dyn AddressLimit>,
    player: PlayerId,
) -> Option<Option<L>> {
    let session = players.remove(&player)?;
    if let (Some(limit), Some(ip)) = (address_limit, session.ip) {
        limit.closed(ip);
    }
    if let Some(link) = session.link {
        links.remove(&link);
    }
    Some(session.link)
}

/// [`Sessions::drain_outputs`]' iterator.
pub struct Outputs<'a, L> {
    shard: std::vec::Drain<'a, ShardOutput>,
    players: &'a mut IdMap<PlayerId, Session<L>>,
    links: &'a mut IdMap<L, PlayerId>,
    address_limit: Option<&'a dyn AddressLimit>,
    closing: &'a mut Vec<(PlayerId, DisconnectReason, &'static str)>,
}

impl<L: Copy + Eq + Hash> Iterator for Outputs<'_, L> {
    type Item = SessionOutput<L>;

    fn next(&mut self) -> Option<SessionOutput<L>> {
        for output in self.shard.by_ref() {
            let output = match output {
                ShardOutput::Send {
                    to,
                    channel,
                    message,
                } => match self.players.get(&to).and_then(|session| session.link) {
                    Some(link) => SessionOutput::Send {
                        link,
                        channel,
                        message,
                    },
                    None => continue,
                },
                ShardOutput::Disconnect { player, reason } => {
                    match release(self.players, self.links, self.address_limit, player) {
                        Some(Some(link)) => SessionOutput::Close {
                            link,
                            reason: DisconnectReason::Kicked,
                            text: reason,
                        },
                        _ => continue,
                    }
                }
                ShardOutput::Seat(change) => SessionOutput::Seat(change),
            };
            return Some(output);
        }
        while let Some((player, reason, text)) = self.closing.pop() {
            if let Some(Some(link)) = release(self.players, self.links, self.address_limit, player)
            {
                return Some(SessionOutput::Close {
                    link,
                    reason,
                    text: text.to_string(),
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::matchmaker::{MatchRequest, Matchmaker};
    use crate::room::{Room, RoomContext};
    use crate::shard::{RoomId, ShardConfig};

    /// docs/PROTOCOL.md ("Closing") classifies every close code a client may send as left
    /// or lost; [`close_code_leaves`] is the rule, and the table must say what it does.
    #[test]
    fn the_documented_close_code_table_is_the_rule() {
        let doc = include_str!("../../../docs/PROTOCOL.md");
        let table = doc
            .split("| code the client closes with | meaning | the player |")
            .nth(1)
            .expect("the close code table")
            .split("\n\n")
            .next()
            .unwrap_or_default();
        let mut rows = 0;
        for row in table.lines().skip(2) {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let (codes, player) = (cells[1], cells[cells.len() - 2]);
            let leaves = match player {
                "left" => true,
                "lost" => false,
                other => panic!("{row}: {other:?} is neither left nor lost"),
            };
            if row.contains("no endpoint may send") {
                // A framing error: the server closes with 1002, and a server close is lost.
                assert!(!leaves, "{row}");
                continue;
            }
            rows += 1;
            for part in codes.split(", ") {
                let part = part.split(' ').next().unwrap_or_default();
                let (low, high) = match part.split_once('–') {
                    Some((low, high)) => (low.parse().unwrap(), high.parse().unwrap()),
                    None if part == "none" => {
                        assert_eq!(close_code_leaves(None), leaves, "{row}");
                        continue;
                    }
                    None => {
                        let code: u16 = part.parse().unwrap_or_else(|_| panic!("{row}: {part}"));
                        (code, code)
                    }
                };
                for code in low..=high {
                    assert_eq!(close_code_leaves(Some(code)), leaves, "{row}: {code}");
                }
            }
        }
        assert!(rows >= 8, "only {rows} rows read from the table");
    }

    /// A link handle as a transport would have one.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    struct Link(u32);

    /// Records the hooks a room sees, as "join 1", "disconnected 1", "leave 1 Left"…, and
    /// welcomes every joining player with a message of its own.
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl Room for Recorder {
        fn join(
            &mut self,
            ctx: &mut RoomContext<'_>,
            member: &crate::room::Member,
        ) -> Result<(), crate::room::JoinRefused> {
            self.0.lock().unwrap().push(format!("join {}", member.id.0));
            ctx.send(
                member.id,
                0,
                Bytes::from(format!("welcome {}", member.id.0)),
            );
            Ok(())
        }

        fn disconnected(&mut self, _ctx: &mut RoomContext<'_>, player: PlayerId) {
            let hook = format!("disconnected {}", player.0);
            self.0.lock().unwrap().push(hook);
        }

        fn reconnected(&mut self, _ctx: &mut RoomContext<'_>, player: PlayerId) {
            let hook = format!("reconnected {}", player.0);
            self.0.lock().unwrap().push(hook);
        }

        fn leave(&mut self, _ctx: &mut RoomContext<'_>, player: PlayerId, reason: LeaveReason) {
            let hook = format!("leave {} {reason:?}", player.0);
            self.0.lock().unwrap().push(hook);
        }
    }

    const ROOM: RoomId = RoomId(1);
    const IP: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));

    /// A table around one recording room, the room's hook log, and the virtual clock's
    /// start.
    fn table() -> (Sessions<Link>, Arc<Mutex<Vec<String>>>, Instant) {
        let start = Instant::now();
        let hooks = Arc::new(Mutex::new(Vec::new()));
        let mut shard = Shard::new(ShardConfig::default());
        shard
            .create_room(
                start,
                ROOM,
                "recorder",
                Box::new(Recorder(hooks.clone())),
                8,
            )
            .unwrap();
        (Sessions::new(shard), hooks, start)
    }

    fn ticket(room: RoomId) -> [u8; USER_DATA_BYTES] {
        SeatTicket {
            room,
            name: "p".into(),
        }
        .encode()
        .unwrap()
    }

    /// Admits and binds: what a worker does for a link that opens.
    fn connect(
        sessions: &mut Sessions<Link>,
        now: Instant,
        player: u64,
        link: Link,
    ) -> Admission<Link> {
        let admission = sessions.admit(now, PlayerId(player), IP, &ticket(ROOM));
        if admission.seat.is_ok() {
            sessions.bind(PlayerId(player), link);
        }
        admission
    }

    /// The hooks the room saw since the last call.
    fn seen(hooks: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
        std::mem::take(&mut *hooks.lock().unwrap())
    }

    #[test]
    fn a_reconnect_inside_the_hold_keeps_the_seat_and_the_room_sees_no_leave() {
        let (mut sessions, hooks, start) = table();
        let _ = connect(&mut sessions, start, 1, Link(1));
        sessions.drain_outputs().for_each(drop);
        let lost = start + Duration::from_secs(1);
        assert_eq!(
            sessions.closed(lost, Link(1), LinkClosed::Lost),
            Some(PlayerId(1))
        );
        assert_eq!(sessions.link_of(PlayerId(1)), None, "the link is gone");
        let back = lost + Duration::from_secs(29);
        let admission = connect(&mut sessions, back, 1, Link(2));
        assert_eq!(
            admission,
            Admission {
                replaced: None,
                seat: Ok(())
            }
        );
        sessions.shard_mut().run(back + Duration::from_secs(60));
        assert_eq!(
            seen(&hooks),
            ["join 1", "disconnected 1", "reconnected 1"],
            "the room saw the player drop and come back, and never leave"
        );
        assert_eq!(sessions.shard().room_of(PlayerId(1)), Some(ROOM));
        assert_eq!(sessions.link_of(PlayerId(1)), Some(Link(2)));
        assert!(
            !sessions
                .drain_outputs()
                .any(|output| matches!(output, SessionOutput::Seat(SeatChange::Unseated { .. }))),
            "the seat was never given up"
        );
    }

    #[test]
    fn after_the_hold_the_seat_is_freed_with_exactly_one_leave() {
        let (mut sessions, hooks, start) = table();
        let _ = connect(&mut sessions, start, 1, Link(1));
        sessions.drain_outputs().for_each(drop);
        let _ = sessions.closed(start, Link(1), LinkClosed::Code(Some(1001)));
        sessions.shard_mut().run(start + Duration::from_secs(29));
        assert_eq!(sessions.shard().room_of(PlayerId(1)), Some(ROOM), "held");
        for secs in [30, 31, 45] {
            sessions.shard_mut().run(start + Duration::from_secs(secs));
        }
        assert_eq!(
            seen(&hooks),
            ["join 1", "disconnected 1", "leave 1 GraceExpired"]
        );
        assert_eq!(
            sessions.shard().room_of(PlayerId(1)),
            None,
            "the seat is free"
        );
        let outputs: Vec<_> = sessions.drain_outputs().collect();
        assert_eq!(
            outputs,
            [SessionOutput::Seat(SeatChange::Unseated {
                player: PlayerId(1),
                room: ROOM
            })],
            "the matchmaker hears of the free seat once, and no link is closed"
        );
        // A late close of the old link changes nothing.
        assert_eq!(sessions.closed(start, Link(1), LinkClosed::Lost), None);
        assert!(seen(&hooks).is_empty());
    }

    #[test]
    fn a_close_that_says_goodbye_leaves_at_once() {
        let (mut sessions, hooks, start) = table();
        let _ = connect(&mut sessions, start, 1, Link(1));
        let _ = connect(&mut sessions, start, 2, Link(2));
        let _ = sessions.closed(start, Link(1), LinkClosed::Goodbye);
        let _ = sessions.closed(start, Link(2), LinkClosed::Code(Some(1000)));
        assert_eq!(
            seen(&hooks),
            ["join 1", "join 2", "leave 1 Left", "leave 2 Left"]
        );
        assert!(sessions.is_empty());
    }

    #[test]
    fn an_unclaimed_seat_reservation_expires() {
        // The HTTP side reserves a seat before it issues a token; the shard's Seated
        // output is what turns it into a seat.
        let (mut sessions, _hooks, start) = table();
        let mut matchmaker =
            Matchmaker::new(1, [("recorder".to_string(), 2)], Duration::from_secs(10));
        let join = MatchRequest::JoinOrCreate {
            filter: crate::listing::LabelFilter::default(),
            kind: "recorder".into(),
        };
        let room = matchmaker.place(start, PlayerId(1), &join).unwrap().room;
        matchmaker.place(start, PlayerId(2), &join).unwrap();
        assert!(
            matchmaker.place(start, PlayerId(3), &join).unwrap().room != room,
            "two reservations fill the room"
        );
        // Player 1 connects with their token; player 2 never does.
        assert_eq!(connect(&mut sessions, start, 1, Link(1)).seat, Ok(()));
        for output in sessions.drain_outputs() {
            if let SessionOutput::Seat(SeatChange::Seated { player, room }) = output {
                matchmaker.joined(player, room);
            }
        }
        let later = start + Duration::from_secs(10);
        assert_eq!(matchmaker.reservation_of(later, PlayerId(2)), None);
        assert_eq!(
            matchmaker.place(later, PlayerId(4), &join).unwrap().room,
            room,
            "player 2's seat is free again once the reservation expired"
        );
    }

    #[test]
    fn a_second_connection_replaces_the_first_exactly_once() {
        let (mut sessions, hooks, start) = table();
        let _ = connect(&mut sessions, start, 1, Link(1));
        sessions.drain_outputs().for_each(drop);
        let again = start + Duration::from_secs(1);
        let admission = connect(&mut sessions, again, 1, Link(2));
        assert_eq!(
            admission,
            Admission {
                replaced: Some(Link(1)),
                seat: Ok(())
            },
            "the older link is to close with AlreadyConnected"
        );
        // The transport reports the old link's close; it is not the player's any more.
        assert_eq!(sessions.closed(again, Link(1), LinkClosed::Lost), None);
        sessions.message(again, Link(1), 0, Bytes::from_static(b"stale"));
        assert_eq!(sessions.shard().stats().messages_unrouted, 0);
        assert_eq!(
            seen(&hooks),
            ["join 1", "disconnected 1", "reconnected 1"],
            "no leave"
        );
        let closes = sessions
            .drain_outputs()
            .filter(|output| matches!(output, SessionOutput::Close { .. }))
            .count();
        assert_eq!(
            closes, 0,
            "the replaced link was closed once, by the admission"
        );
        assert_eq!(sessions.player_on(Link(2)), Some(PlayerId(1)));
        assert_eq!(sessions.player_on(Link(1)), None);
        assert_eq!(sessions.len(), 1);
    }

    /// Today's semantics: a kick frees the seat and closes the link with `Kicked`. The
    /// token that player connected with is single-use, so the protocol's replay set
    /// refuses it before the table hears of it; a fresh token for the same room is a new
    /// join (the room sees `join`, never `reconnected`), which the room may refuse.
    #[test]
    fn a_kicked_player_has_no_seat_to_come_back_to() {
        let (mut sessions, hooks, start) = table();
        let _ = connect(&mut sessions, start, 1, Link(1));
        let _ = connect(&mut sessions, start, 2, Link(2));
        sessions.drain_outputs().for_each(drop);
        assert!(sessions.kick(start, PlayerId(1), "cheating"));
        let outputs: Vec<_> = sessions.drain_outputs().collect();
        assert_eq!(
            outputs,
            [
                SessionOutput::Seat(SeatChange::Unseated {
                    player: PlayerId(1),
                    room: ROOM
                }),
                SessionOutput::Close {
                    link: Link(1),
                    reason: DisconnectReason::Kicked,
                    text: "cheating".into()
                }
            ]
        );
        assert_eq!(sessions.closed(start, Link(1), LinkClosed::Lost), None);
        assert!(
            !sessions.kick(start, PlayerId(1), "again"),
            "nothing to kick"
        );
        let back = start + Duration::from_secs(1);
        let admission = connect(&mut sessions, back, 1, Link(3));
        assert_eq!(admission.replaced, None, "nothing left to replace");
        assert_eq!(
            seen(&hooks),
            ["join 1", "join 2", "leave 1 Kicked", "join 1"],
            "no held seat: the player joins anew"
        );
    }

    #[test]
    fn a_room_send_right_after_seating_reaches_the_new_link() {
        let (mut sessions, _hooks, start) = table();
        let _ = connect(&mut sessions, start, 1, Link(7));
        sessions.shard_mut().announce(start, "hello");
        let sends: Vec<_> = sessions
            .drain_outputs()
            .filter_map(|output| match output {
                SessionOutput::Send { link, message, .. } => Some((link, message)),
                _ => None,
            })
            .collect();
        assert_eq!(
            sends,
            [
                (Link(7), Bytes::from_static(b"welcome 1")),
                (Link(7), Bytes::from_static(b"hello"))
            ],
            "what the room sent while seating the player and right after reaches their link"
        );
    }

    /// Counts open connections per address, at most `max`.
    struct Counting {
        open: Arc<Mutex<HashMap<IpAddr, u32>>>,
        max: u32,
    }

    impl AddressLimit for Counting {
        fn try_open(&self, _now: Instant, ip: IpAddr) -> bool {
            let mut open = self.open.lock().unwrap();
            let count = open.entry(ip).or_default();
            *count < self.max && {
                *count += 1;
                true
            }
        }

        fn closed(&self, ip: IpAddr) {
            *self.open.lock().unwrap().get_mut(&ip).unwrap() -= 1;
        }
    }

    #[test]
    fn the_address_count_follows_the_links() {
        let (mut sessions, _hooks, start) = table();
        let open = Arc::new(Mutex::new(HashMap::new()));
        sessions.set_address_limit(Box::new(Counting {
            open: open.clone(),
            max: 2,
        }));
        let count = || open.lock().unwrap().get(&IP.unwrap()).copied();
        let _ = connect(&mut sessions, start, 1, Link(1));
        let _ = connect(&mut sessions, start, 2, Link(2));
        assert_eq!(
            connect(&mut sessions, start, 3, Link(3)).seat,
            Err(Refused::TooManyFromAddress)
        );
        assert_eq!(
            connect(&mut sessions, start, 1, Link(4)).replaced,
            Some(Link(1)),
            "a replacement from the same address takes the older link's place"
        );
        assert_eq!(count(), Some(2));
        let _ = sessions.closed(start, Link(4), LinkClosed::Lost);
        assert_eq!(count(), Some(1));
        let _ = sessions.admit(start, PlayerId(5), IP, &[0; USER_DATA_BYTES]);
        assert_eq!(count(), Some(1), "a refused ticket gives its place back");
        sessions.shut_down(start);
        let closes: Vec<_> = sessions
            .drain_outputs()
            .filter_map(|output| match output {
                SessionOutput::Close { link, reason, .. } => Some((link, reason)),
                _ => None,
            })
            .collect();
        assert_eq!(closes, [(Link(2), DisconnectReason::ServerShutdown)]);
        assert_eq!(count(), Some(0));
        assert_eq!(
            sessions.stats(),
            SessionStats {
                joins_refused: 2,
                refused_by_address: 1
            }
        );
    }
}
