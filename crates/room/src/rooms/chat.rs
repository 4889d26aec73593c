//! The `chat` room: members send lines of text; everyone (the sender too, so all see one
//! order) receives each line with the sender's seat and name, plus join and leave notices.

use std::collections::HashMap;

use bytes::Bytes;
use tickwire_wire::{Decode, Encode, encode_to_vec};

use crate::room::{JoinRefused, LeaveReason, Member, PlayerId, Room, RoomContext};

/// The channel chat travels on: channel 0, reliable in the default configuration.
pub const CHAT_CHANNEL: u8 = 0;
/// Longest chat line, in bytes of UTF-8.
pub const MAX_LINE_BYTES: usize = 256;
/// Longest name shown in chat, in bytes.
pub const MAX_NAME_BYTES: usize = 32;
/// Invalid lines (too long, not UTF-8, empty) a member may send before being kicked.
pub const MAX_VIOLATIONS: u32 = 3;

/// What the chat room sends its members, on [`CHAT_CHANNEL`].
#[derive(Debug, Clone, PartialEq, Eq, Encode, Decode)]
pub enum ChatEvent {
    /// A member said something.
    Line {
        /// The speaker's seat.
        #[wire(bits = 16)]
        seat: u16,
        /// The speaker's name.
        #[wire(max_len = MAX_NAME_BYTES)]
        name: String,
        /// What they said.
        #[wire(max_len = MAX_LINE_BYTES)]
        text: String,
    },
    /// A member arrived.
    Joined {
        /// Their seat.
        #[wire(bits = 16)]
        seat: u16,
        /// Their name.
        #[wire(max_len = MAX_NAME_BYTES)]
        name: String,
    },
    /// A member left for good.
    Left {
        /// The seat they had.
        #[wire(bits = 16)]
        seat: u16,
        /// Their name.
        #[wire(max_len = MAX_NAME_BYTES)]
        name: String,
    },
    /// The server's operator said something to everyone.
    Announcement {
        /// What they said.
        #[wire(max_len = MAX_LINE_BYTES)]
        text: String,
    },
}

/// Relays validated chat lines; kicks members who keep sending invalid ones.
#[derive(Debug, Default)]
pub struct ChatRoom {
    violations: HashMap<PlayerId, u32>,
    /// Lines refused as invalid, across all members.
    pub refused_lines: u64,
}

/// `text` cut to at most `max` bytes on a character boundary.
fn truncated(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A name cut to at most [`MAX_NAME_BYTES`].
fn shown_name(name: &str) -> String {
    truncated(name, MAX_NAME_BYTES).to_string()
}

fn encoded(event: &ChatEvent) -> Option<Bytes> {
    // Every field is bounded before it gets here, so encoding cannot fail.
    encode_to_vec(event).ok().map(Bytes::from)
}

impl Room for ChatRoom {
    fn tick_rate_hz(&self) -> u32 {
        // Chat needs no simulation; ticks only pace the room's bookkeeping.
        10
    }

    fn join(&mut self, ctx: &mut RoomContext<'_>, member: &Member) -> Result<(), JoinRefused> {
        let event = ChatEvent::Joined {
            seat: member.seat.0,
            name: shown_name(&member.name),
        };
        if let Some(message) = encoded(&event) {
            ctx.broadcast(CHAT_CHANNEL, message);
        }
        Ok(())
    }

    fn leave(&mut self, ctx: &mut RoomContext<'_>, player: PlayerId, _reason: LeaveReason) {
        self.violations.remove(&player);
        let Some(member) = ctx.member(player) else {
            return;
        };
        let event = ChatEvent::Left {
            seat: member.seat.0,
            name: shown_name(&member.name),
        };
        if let Some(message) = encoded(&event) {
            ctx.broadcast_except(player, CHAT_CHANNEL, message);
        }
    }

    fn announce(&mut self, ctx: &mut RoomContext<'_>, text: &str) {
        let event = ChatEvent::Announcement {
            text: truncated(text, MAX_LINE_BYTES).to_string(),
        };
        if let Some(message) = encoded(&event) {
            ctx.broadcast(CHAT_CHANNEL, message);
        }
    }

    fn message(&mut self, ctx: &mut RoomContext<'_>, from: PlayerId, channel: u8, message: Bytes) {
        let Some(member) = ctx.member(from) else {
            return;
        };
        let text = std::str::from_utf8(&message).ok().filter(|text| {
            channel == CHAT_CHANNEL && !text.trim().is_empty() && text.len() <= MAX_LINE_BYTES
        });
        let Some(text) = text else {
            self.refused_lines += 1;
            let violations = self.violations.entry(from).or_insert(0);
            *violations += 1;
            if *violations >= MAX_VIOLATIONS {
                ctx.kick(from, "too many invalid chat lines");
            }
            return;
        };
        let event = ChatEvent::Line {
            seat: member.seat.0,
            name: shown_name(&member.name),
            text: text.to_string(),
        };
        if let Some(line) = encoded(&event) {
            ctx.broadcast(CHAT_CHANNEL, line);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use tickwire_wire::decode_exact;

    use super::*;
    use crate::host::RoomHost;
    use crate::room::Command;
    use crate::shard::RoomId;

    fn broadcasts(host: &mut RoomHost) -> Vec<(ChatEvent, Option<PlayerId>)> {
        host.take_commands()
            .filter_map(|command| match command {
                Command::Broadcast {
                    channel: CHAT_CHANNEL,
                    message,
                    except,
                } => Some((
                    decode_exact::<ChatEvent>(&message).expect("decodes"),
                    except,
                )),
                _ => None,
            })
            .collect()
    }

    /// docs/PROTOCOL.md ("The chat room") shows these encodings; a client written from it
    /// must decode what the room sends.
    #[test]
    fn the_documented_examples_are_what_the_room_sends() {
        let doc = include_str!("../../../../docs/PROTOCOL.md");
        let examples = [
            ChatEvent::Line {
                seat: 1,
                name: "ada".into(),
                text: "hi".into(),
            },
            ChatEvent::Joined {
                seat: 2,
                name: "bo".into(),
            },
            ChatEvent::Left {
                seat: 2,
                name: "bo".into(),
            },
            ChatEvent::Announcement { text: "ok".into() },
        ];
        for event in examples {
            let bytes = encode_to_vec(&event).unwrap();
            let hex: Vec<String> = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
            let hex = hex.join(" ");
            assert!(
                doc.contains(&format!("`{hex}`")),
                "docs/PROTOCOL.md does not show {event:?} as `{hex}`"
            );
            assert_eq!(decode_exact::<ChatEvent>(&bytes).unwrap(), event);
        }
    }

    #[test]
    fn lines_reach_everyone_with_the_speakers_seat_and_name() {
        let now = Instant::now();
        let mut host = RoomHost::new(RoomId(1), Box::new(ChatRoom::default()), now, 8).unwrap();
        host.join(now, PlayerId(1), "ada".into()).unwrap();
        host.join(now, PlayerId(2), "grace".into()).unwrap();
        assert_eq!(
            broadcasts(&mut host),
            [
                (
                    ChatEvent::Joined {
                        seat: 0,
                        name: "ada".into()
                    },
                    None
                ),
                (
                    ChatEvent::Joined {
                        seat: 1,
                        name: "grace".into()
                    },
                    None
                ),
            ]
        );
        host.message(
            now,
            PlayerId(2),
            CHAT_CHANNEL,
            Bytes::from_static("hi ✓".as_bytes()),
        );
        host.leave(now, PlayerId(1), LeaveReason::Left);
        assert_eq!(
            broadcasts(&mut host),
            [
                (
                    ChatEvent::Line {
                        seat: 1,
                        name: "grace".into(),
                        text: "hi ✓".into()
                    },
                    None
                ),
                (
                    ChatEvent::Left {
                        seat: 0,
                        name: "ada".into()
                    },
                    Some(PlayerId(1))
                ),
            ]
        );
    }

    #[test]
    fn invalid_lines_are_refused_and_repeat_offenders_kicked() {
        let now = Instant::now();
        let mut host = RoomHost::new(RoomId(1), Box::new(ChatRoom::default()), now, 8).unwrap();
        host.join(now, PlayerId(1), "mallory".into()).unwrap();
        host.take_commands().for_each(drop);
        let too_long = Bytes::from(vec![b'a'; MAX_LINE_BYTES + 1]);
        host.message(now, PlayerId(1), CHAT_CHANNEL, too_long);
        host.message(
            now,
            PlayerId(1),
            CHAT_CHANNEL,
            Bytes::from_static(&[0xff, 0xfe]),
        );
        assert_eq!(host.members().len(), 1, "two strikes");
        assert!(
            broadcasts(&mut host).is_empty(),
            "nothing invalid is relayed"
        );
        host.message(now, PlayerId(1), CHAT_CHANNEL, Bytes::from_static(b"   "));
        assert!(host.members().is_empty(), "the third invalid line kicks");
        let kicked = host.take_commands().any(|command| {
            matches!(
                command,
                Command::Kick {
                    player: PlayerId(1),
                    ..
                }
            )
        });
        assert!(kicked);
    }

    #[test]
    fn long_names_are_cut_on_a_character_boundary() {
        let name = "é".repeat(20);
        let shown = shown_name(&name);
        assert!(shown.len() <= MAX_NAME_BYTES);
        assert_eq!(shown, "é".repeat(16));
    }
}
