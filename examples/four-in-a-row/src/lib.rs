//! Four in a row, the game `docs/GUIDE.md` builds: two players drop discs into a 7 × 6
//! grid, and four of one colour in a line wins. The room is the whole game; it needs
//! `tickwire-room` and `tickwire-wire` only, and its tests (`tests/game.rs`) drive it with a
//! [`RoomHost`](tickwire_room::host::RoomHost) and a clock of their own.

use std::time::Duration;

use bytes::Bytes;
use tickwire_room::listing::RoomOptions;
use tickwire_room::room::{
    CreateRefused, JoinRefused, LeaveReason, Member, PlayerId, Room, RoomContext,
};
use tickwire_room::timers::TimerId;
use tickwire_wire::{Decode, Encode};

/// Columns of the grid.
pub const COLUMNS: usize = 7;
/// Rows of the grid.
pub const ROWS: usize = 6;
/// The channel every message travels on: channel 0 is reliable and ordered by default.
pub const CHANNEL: u8 = 0;
/// How long a player has for a move before they lose it, unless the room was created with
/// another `turn_secs` option.
pub const DEFAULT_TURN: Duration = Duration::from_secs(60);

/// What a player sends.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub enum Move {
    /// Drops a disc into a column, 0 (left) to 6.
    Drop {
        /// The column.
        #[wire(min = 0, max = 6)]
        column: u8,
    },
    /// After a game: play again (when both have asked).
    Rematch,
}

/// Where the game is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Encode, Decode)]
pub enum Status {
    /// One player is seated; the other is awaited.
    Waiting,
    /// Both are seated; `turn` moves next.
    Playing,
    /// Someone won (`winner`).
    Won,
    /// The grid is full.
    Draw,
}

/// What the room sends.
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub enum Update {
    /// The whole game, to each player after every change (it is small: 42 cells of 2 bits).
    Game {
        /// Cells row by row from the bottom, left to right: 0 empty, 1 seat 0's, 2 seat 1's.
        #[wire(min = 0, max = 2)]
        cells: [u8; COLUMNS * ROWS],
        /// Where the game is.
        status: Status,
        /// Whose move it is, or who won: a seat.
        #[wire(min = 0, max = 1)]
        turn: u8,
        /// The recipient's own seat.
        #[wire(min = 0, max = 1)]
        you: u8,
    },
    /// A move refused, and why (shown to the player).
    Refused {
        /// Why.
        #[wire(max_len = 64)]
        reason: String,
    },
}

/// The turn clock.
const TURN: TimerId = TimerId(1);

/// The room: the grid, whose turn it is, and who asked for a rematch.
#[derive(Debug)]
pub struct FourInARow {
    cells: [u8; COLUMNS * ROWS],
    status: Status,
    turn: u8,
    turn_time: Duration,
    rematch: [bool; 2],
}

impl Default for FourInARow {
    fn default() -> Self {
        Self {
            cells: [0; COLUMNS * ROWS],
            status: Status::Waiting,
            turn: 0,
            turn_time: DEFAULT_TURN,
            rematch: [false; 2],
        }
    }
}

impl FourInARow {
    /// The seat's disc (1 or 2) at `column`, `row` (0 is the bottom), or 0.
    pub fn cell(&self, column: usize, row: usize) -> u8 {
        self.cells[row * COLUMNS + column]
    }

    fn seat_of(ctx: &RoomContext<'_>, player: PlayerId) -> Option<u8> {
        ctx.member(player).map(|member| member.seat.0 as u8)
    }

    /// Sends every player the game, each with their own seat.
    fn send_game(&self, ctx: &mut RoomContext<'_>) {
        let seats: Vec<(PlayerId, u8)> = ctx
            .members()
            .iter()
            .map(|member| (member.id, member.seat.0 as u8))
            .collect();
        for (player, you) in seats {
            self.send_game_to(ctx, player, you);
        }
    }

    fn send_game_to(&self, ctx: &mut RoomContext<'_>, player: PlayerId, you: u8) {
        let game = Update::Game {
            cells: self.cells,
            status: self.status,
            turn: self.turn,
            you,
        };
        // Every field is within its declared bounds by construction, so a failure is this
        // code's bug: the panic disposes of this room alone, and fails its tests.
        ctx.send_message(player, CHANNEL, &game)
            .expect("a game update within its bounds");
    }

    fn refuse(ctx: &mut RoomContext<'_>, player: PlayerId, reason: &str) {
        let refused = Update::Refused {
            reason: reason.to_string(),
        };
        // The reasons are this file's own, all shorter than `max_len`.
        ctx.send_message(player, CHANNEL, &refused)
            .expect("a refusal within its bounds");
    }

    fn start(&mut self, ctx: &mut RoomContext<'_>, first: u8) {
        self.cells = [0; COLUMNS * ROWS];
        self.status = Status::Playing;
        self.turn = first;
        self.rematch = [false; 2];
        ctx.delay(TURN, self.turn_time);
    }

    /// Drops `seat`'s disc into `column`; the reason if the move is not legal.
    fn drop_disc(&mut self, seat: u8, column: usize) -> Result<(), String> {
        match self.status {
            Status::Playing => {}
            Status::Waiting => return Err("wait for a second player".into()),
            Status::Won | Status::Draw => return Err("the game is over".into()),
        }
        if seat != self.turn {
            return Err("not your turn".into());
        }
        let row = (0..ROWS)
            .find(|row| self.cell(column, *row) == 0)
            .ok_or_else(|| format!("column {} is full", column + 1))?;
        self.cells[row * COLUMNS + column] = seat + 1;
        if self.wins(column, row) {
            self.status = Status::Won;
        } else if self.cells.iter().all(|cell| *cell != 0) {
            self.status = Status::Draw;
        } else {
            self.turn = 1 - self.turn;
        }
        Ok(())
    }

    /// Whether the disc at `column`, `row` makes four in a line.
    fn wins(&self, column: usize, row: usize) -> bool {
        let disc = self.cell(column, row);
        let run = |dc: isize, dr: isize| {
            let mut count = 0;
            let (mut c, mut r) = (column as isize + dc, row as isize + dr);
            while (0..COLUMNS as isize).contains(&c)
                && (0..ROWS as isize).contains(&r)
                && self.cell(c as usize, r as usize) == disc
            {
                count += 1;
                c += dc;
                r += dr;
            }
            count
        };
        [(1, 0), (0, 1), (1, 1), (1, -1)]
            .into_iter()
            .any(|(dc, dr)| 1 + run(dc, dr) + run(-dc, -dr) >= 4)
    }
}

impl Room for FourInARow {
    /// A turn-based game has nothing to simulate: one tick a second (timers keep their own
    /// time).
    fn tick_rate_hz(&self) -> u32 {
        1
    }

    fn create(
        &mut self,
        ctx: &mut RoomContext<'_>,
        options: &RoomOptions,
    ) -> Result<(), CreateRefused> {
        let secs: u64 = options
            .parse_or("turn_secs", DEFAULT_TURN.as_secs())
            .map_err(CreateRefused)?;
        if !(5..=600).contains(&secs) {
            return Err(CreateRefused(format!("turn_secs {secs} outside 5..=600")));
        }
        self.turn_time = Duration::from_secs(secs);
        // A finished game whose players have gone is of no use to anyone.
        ctx.set_auto_dispose(Some(Duration::ZERO));
        Ok(())
    }

    fn join(&mut self, ctx: &mut RoomContext<'_>, member: &Member) -> Result<(), JoinRefused> {
        if member.seat.0 > 1 {
            return Err(JoinRefused::game("this game is for two"));
        }
        if ctx.members().len() == 2 {
            // A game in progress is no one else's business.
            ctx.lock();
            self.start(ctx, 0);
        }
        self.send_game(ctx);
        Ok(())
    }

    fn reconnected(&mut self, ctx: &mut RoomContext<'_>, player: PlayerId) {
        // A reloaded page starts from nothing: it gets the game again.
        if let Some(seat) = Self::seat_of(ctx, player) {
            self.send_game_to(ctx, player, seat);
        }
    }

    fn leave(&mut self, ctx: &mut RoomContext<'_>, player: PlayerId, _reason: LeaveReason) {
        // The one left behind waits for a new opponent, who may now find the room.
        ctx.cancel(TURN);
        self.status = Status::Waiting;
        self.cells = [0; COLUMNS * ROWS];
        ctx.unlock();
        let stays: Vec<PlayerId> = ctx
            .members()
            .iter()
            .map(|member| member.id)
            .filter(|id| *id != player)
            .collect();
        for other in stays {
            if let Some(seat) = Self::seat_of(ctx, other) {
                self.send_game_to(ctx, other, seat);
            }
        }
    }

    fn message(&mut self, ctx: &mut RoomContext<'_>, from: PlayerId, _channel: u8, bytes: Bytes) {
        let (Some(seat), Some(play)) = (Self::seat_of(ctx, from), ctx.decode::<Move>(&bytes))
        else {
            return;
        };
        match play {
            Move::Drop { column } => match self.drop_disc(seat, usize::from(column)) {
                Ok(()) => {
                    if self.status == Status::Playing {
                        ctx.delay(TURN, self.turn_time);
                    } else {
                        ctx.cancel(TURN);
                    }
                    self.send_game(ctx);
                }
                Err(reason) => Self::refuse(ctx, from, &reason),
            },
            Move::Rematch => {
                if !matches!(self.status, Status::Won | Status::Draw) {
                    return Self::refuse(ctx, from, "the game is not over");
                }
                self.rematch[usize::from(seat)] = true;
                if self.rematch == [true, true] {
                    // The loser (or, after a draw, the second player) starts.
                    let first = if self.status == Status::Won {
                        1 - self.turn
                    } else {
                        1
                    };
                    self.start(ctx, first);
                    self.send_game(ctx);
                }
            }
        }
    }

    fn timer(&mut self, ctx: &mut RoomContext<'_>, timer: TimerId) {
        if timer == TURN && self.status == Status::Playing {
            // Too slow: the other player wins.
            self.turn = 1 - self.turn;
            self.status = Status::Won;
            self.send_game(ctx);
        }
    }
}
