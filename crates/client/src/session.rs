//! A player's stay on a server across lost connections: matchmaking, connecting, and coming
//! back to the same seat with a fresh token when the connection is lost.

use std::time::Duration;

use bytes::Bytes;
use rand::Rng;

use crate::link::{ConnectError, ConnectOptions, Ended, Link, LinkEvent, SendError, Transport};
use crate::matchmake::{MatchAnswer, MatchmakeError, MatchmakeRequest, matchmake, matchmake_with};

/// Capped exponential backoff with jitter between reconnection attempts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The first delay's ceiling.
    pub initial: Duration,
    /// No delay is longer.
    pub max: Duration,
    /// Attempts before giving up.
    pub attempts: u32,
}

impl Default for Backoff {
    /// 250 ms, doubling to at most 8 s, 8 attempts: about half a minute in all, the
    /// server's default reconnection grace.
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(250),
            max: Duration::from_secs(8),
            attempts: 8,
        }
    }
}

impl Backoff {
    /// The wait before attempt `attempt` (from 0): a ceiling of `initial · 2^attempt` capped
    /// at `max`, of which the first half is always waited and the second half drawn at
    /// random, so a crowd dropped together does not come back together.
    pub fn delay(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        let ceiling = self
            .initial
            .saturating_mul(1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX))
            .min(self.max);
        let half = ceiling / 2;
        half + half.mul_f64(rng.random::<f64>())
    }
}

/// Why a session could not start or come back.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Matchmaking failed.
    #[error(transparent)]
    Matchmake(#[from] MatchmakeError),
    /// Connecting failed.
    #[error(transparent)]
    Connect(#[from] ConnectError),
}

/// What a session delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEvent {
    /// A message from the room.
    Message {
        /// Channel id.
        channel: u8,
        /// The bytes.
        message: Bytes,
    },
    /// The connection was lost and is back. [`Session::answer`] has the new answer; its
    /// `reconnect` says whether the server still held the seat when it was asked (a player
    /// whose seat was not yet registered gets their reservation back instead).
    Reconnected {
        /// Whether the player is back in the room they were in, rather than placed anew
        /// (after the grace period).
        same_room: bool,
        /// Attempts it took.
        attempts: u32,
    },
    /// The session is over: ended by the server or this client, or reconnecting gave up.
    Ended(Ended),
}

/// A player on a server: the first matchmaking and connection, then reconnection that keeps
/// the seat.
///
/// ```no_run
/// # async fn play() -> Result<(), Box<dyn std::error::Error>> {
/// use bytes::Bytes;
/// use tickwire_client::{ConnectOptions, MatchmakeRequest, Session, SessionEvent, Transport};
///
/// let request = MatchmakeRequest::kind("relay").named("ann");
/// let mut session =
///     Session::start("http://127.0.0.1:8080", request, Transport::Udp, ConnectOptions::default())
///         .await?;
/// session.send(0, Bytes::from_static(b"hello, room"))?;
/// loop {
///     match session.next_event().await {
///         SessionEvent::Message { channel, message } => println!("{channel}: {message:?}"),
///         SessionEvent::Reconnected { same_room, .. } => println!("back (same room: {same_room})"),
///         SessionEvent::Ended(why) => break println!("over: {why}"),
///     }
/// }
/// # Ok(())
/// # }
/// ```
pub struct Session {
    server: String,
    request: MatchmakeRequest,
    transport: Transport,
    options: ConnectOptions,
    backoff: Backoff,
    answer: MatchAnswer,
    link: Link,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("server", &self.server)
            .field("player_id", &self.answer.player_id)
            .field("room", &self.answer.room)
            .field("link", &self.link)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Matchmakes at `server` (`http://host:port`, or `https://` verified with
    /// `options.tls` or else the web's authorities) and connects over `transport`.
    pub async fn start(
        server: &str,
        request: MatchmakeRequest,
        transport: Transport,
        options: ConnectOptions,
    ) -> Result<Self, SessionError> {
        let answer = matchmake_trusting(server, &request, &options).await?;
        let link = Link::connect(&answer, transport, &options).await?;
        Ok(Self {
            server: server.to_string(),
            request,
            transport,
            options,
            backoff: Backoff::default(),
            answer,
            link,
        })
    }

    /// Replaces the reconnection policy.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The latest matchmaking answer: player id, room, session.
    pub fn answer(&self) -> &MatchAnswer {
        &self.answer
    }

    /// The current connection.
    pub fn link(&self) -> &Link {
        &self.link
    }

    /// Queues `message` on `channel` (see [`Link::send`]).
    pub fn send(&mut self, channel: u8, message: Bytes) -> Result<(), SendError> {
        self.link.send(channel, message)
    }

    /// Sends everything queued.
    pub async fn flush(&mut self) -> Result<(), Ended> {
        self.link.flush().await
    }

    /// The next message; a lost connection is reconnected first (see [`Backoff`]).
    pub async fn next_event(&mut self) -> SessionEvent {
        match self.link.next_event().await {
            LinkEvent::Message { channel, message } => SessionEvent::Message { channel, message },
            LinkEvent::Ended(ended) if ended.is_retryable() => match self.reconnect().await {
                Ok(event) => event,
                Err(_) => SessionEvent::Ended(ended),
            },
            LinkEvent::Ended(ended) => SessionEvent::Ended(ended),
        }
    }

    /// Drops the current connection without a word to the server (the network is gone, the
    /// device changed networks) and comes back to the seat with a fresh token, retrying
    /// with backoff. The server replaces the old connection, or finds its seat held.
    pub async fn reconnect(&mut self) -> Result<SessionEvent, SessionError> {
        let mut request = self.request.clone();
        request.session = Some(self.answer.session.clone());
        let mut attempt = 0;
        loop {
            match self.try_reconnect(&request).await {
                Ok(same_room) => {
                    return Ok(SessionEvent::Reconnected {
                        same_room,
                        attempts: attempt + 1,
                    });
                }
                Err(error) if attempt + 1 >= self.backoff.attempts => return Err(error),
                Err(_) => {
                    let delay = self.backoff.delay(attempt, &mut rand::rng());
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
            }
        }
    }

    async fn try_reconnect(&mut self, request: &MatchmakeRequest) -> Result<bool, SessionError> {
        let answer = matchmake_trusting(&self.server, request, &self.options).await?;
        let link = Link::connect(&answer, self.transport, &self.options).await?;
        let same_room = answer.room == self.answer.room;
        self.answer = answer;
        self.link = link;
        Ok(same_room)
    }

    /// Leaves for good.
    pub async fn close(&mut self) {
        self.link.close().await;
    }
}

/// Matchmakes with `options`' TLS trust when it has one, else the web's authorities.
async fn matchmake_trusting(
    server: &str,
    request: &MatchmakeRequest,
    options: &ConnectOptions,
) -> Result<MatchAnswer, MatchmakeError> {
    match &options.tls {
        Some(tls) => matchmake_with(server, request, options.timeout, tls).await,
        None => matchmake(server, request, options.timeout).await,
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_keep_at_least_half() {
        let backoff = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
            attempts: 10,
        };
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for attempt in 0..40 {
            let ceiling = Duration::from_millis(100 << attempt.min(4)).min(backoff.max);
            for _ in 0..50 {
                let delay = backoff.delay(attempt, &mut rng);
                assert!(
                    delay >= ceiling / 2 && delay <= ceiling,
                    "attempt {attempt}: {delay:?} outside [{:?}, {ceiling:?}]",
                    ceiling / 2
                );
            }
        }
    }

    #[test]
    fn jitter_spreads_a_crowd() {
        let backoff = Backoff::default();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let delays: std::collections::HashSet<Duration> =
            (0..100).map(|_| backoff.delay(3, &mut rng)).collect();
        assert!(delays.len() > 90, "only {} distinct delays", delays.len());
    }
}
