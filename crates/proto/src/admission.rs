//! Admission: the one check of a connect token, for every transport.
//!
//! The UDP handshake's request ([`Server`](crate::Server)) and the first message of a
//! WebSocket or WebTransport stream (`tickwire_net::ws::WsEndpoint`) both end here:
//! [`Admission::admit`] checks, in this order, the protocol id, the expiry, the seal of the
//! private part under the server key, that the token names one of this server's addresses,
//! and that it was not used before, and returns what the sealed part says ([`Admitted`]) or
//! one [`Refusal`]. Each transport maps a refusal to its own report in one place (a counted
//! `DropReason` for UDP, a close code for streams).
//!
//! A token opens one connection on one transport: every [`Admission`] of a server shares
//! one [`UsedTokens`] set. What counts as "the same connection" is the [`Binding`] the
//! caller passes: the UDP handshake may repeat its request from the same address (its
//! challenge may have been lost), a stream never sends its token twice.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::crypto::{Cipher, Key, NONCE_BYTES, TAG_BYTES};
use crate::token::{
    CONNECT_TOKEN_BYTES, ConnectToken, PRIVATE_TOKEN_BYTES, PrivateToken, TokenError,
    USER_DATA_BYTES,
};

/// Why a connect token was refused. Every transport reports these and no others.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The bytes are not a connect token: wrong length, version or layout.
    #[error("message of {len} bytes is not a {CONNECT_TOKEN_BYTES}-byte connect token")]
    Malformed {
        /// Bytes received.
        len: usize,
    },
    /// The token is for another game or protocol version.
    #[error("token is for protocol {found:#x}, expected {expected:#x}")]
    WrongProtocol {
        /// Protocol id in the token.
        found: u64,
        /// This server's protocol id.
        expected: u64,
    },
    /// The token's expiry has passed.
    #[error("token expired at {expire_timestamp}, now {now}")]
    Expired {
        /// Unix seconds the token expired at.
        expire_timestamp: u64,
        /// Unix seconds now.
        now: u64,
    },
    /// The private part does not authenticate: altered, or sealed under another key.
    #[error("private token does not authenticate")]
    Tampered,
    /// The private part authenticates but does not read as a private token: the issuer
    /// holds the key and wrote something else.
    #[error("private token authenticates but its {PRIVATE_TOKEN_BYTES} bytes do not read")]
    PrivateMalformed,
    /// None of the token's server addresses is one of this server's.
    #[error("token names none of this server's {count} addresses")]
    WrongServer {
        /// Addresses this server answers to.
        count: usize,
    },
    /// The token was already used, on this transport or another, and not by a repeat of
    /// the same UDP handshake.
    #[error("token already used (one connection per token; {remembered} used tokens remembered)")]
    Replayed {
        /// How many used tokens the server remembers (the set's bound).
        remembered: usize,
    },
}

/// What an admitted token says about the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// The client id from the sealed part: the player's id in rooms.
    pub client_id: u64,
    /// Application data from the sealed part.
    pub user_data: Box<[u8; USER_DATA_BYTES]>,
    /// Key for packets from the client to the server (the UDP handshake's).
    pub client_to_server_key: Key,
    /// Key for packets from the server to the client (the UDP handshake's).
    pub server_to_client_key: Key,
    /// When the token expires, unix seconds.
    pub expire_timestamp: u64,
}

/// What a token is used for, deciding whether a second use of it is a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// A UDP handshake from this address: the same address may repeat its request (its
    /// challenge may have been lost); any other address, or any stream, is refused.
    Address(SocketAddr),
    /// A WebSocket or WebTransport stream: the token is sent once, so any reuse is refused.
    Stream,
}

/// The part of a connect token every transport carries: what the sealed part is checked
/// against. The UDP request holds exactly this; a stream's token holds it and more.
#[derive(Debug, Clone, Copy)]
pub struct SealedToken<'a> {
    /// Protocol id from the public part.
    pub protocol_id: u64,
    /// Expiry from the public part, unix seconds.
    pub expire_timestamp: u64,
    /// Nonce the private part was sealed with.
    pub nonce: [u8; NONCE_BYTES],
    /// The sealed private part.
    pub private_token: &'a [u8; PRIVATE_TOKEN_BYTES],
}

impl ConnectToken {
    /// The part the server checks.
    pub fn sealed(&self) -> SealedToken<'_> {
        SealedToken {
            protocol_id: self.protocol_id,
            expire_timestamp: self.expire_timestamp,
            nonce: self.nonce,
            private_token: &self.private_token,
        }
    }
}

/// Connect tokens already used, by their 16-byte tag, with the binding of their first use.
/// A token is forgotten once it has expired (an expired token is refused before it gets
/// here, so remembering it protects nothing), and past `capacity` the oldest is forgotten.
/// So the set holds about the tokens of one validity period: a server under steady churn
/// keeps a steady set, not one that grows to its bound over hours.
///
/// A handle: clones share one set, so one server's UDP shards and its WebSocket and
/// WebTransport endpoint refuse a token any of them took. The lock is taken once per
/// connection attempt, after the token authenticated (forged tokens never reach it), and
/// held for one hash-map lookup and insert: never on a packet or message path.
///
/// A forgotten token can be used again if it has not expired, so the bound should cover
/// the tokens issued within one validity period.
#[derive(Clone)]
pub struct UsedTokens {
    inner: Arc<Mutex<UsedSet>>,
}

struct UsedSet {
    first_use: HashMap<[u8; TAG_BYTES], Binding>,
    /// Tags in the order they were first used, each with its token's expiry (unix seconds).
    order: VecDeque<([u8; TAG_BYTES], u64)>,
    capacity: usize,
}

impl UsedSet {
    /// A tag not seen yet may be used; a seen one only again from the UDP address it was
    /// first used from (a handshake repeating its request).
    fn allows(&self, tag: &[u8; TAG_BYTES], binding: Binding) -> Result<(), Refusal> {
        match (self.first_use.get(tag), binding) {
            (None, _) => Ok(()),
            (Some(Binding::Address(first)), Binding::Address(now)) if *first == now => Ok(()),
            _ => Err(Refusal::Replayed {
                remembered: self.capacity,
            }),
        }
    }
}

impl std::fmt::Debug for UsedTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = self.lock();
        f.debug_struct("UsedTokens")
            .field("remembered", &set.order.len())
            .field("capacity", &set.capacity)
            .finish()
    }
}

impl UsedTokens {
    /// An empty set remembering up to `capacity` tokens (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(UsedSet {
                first_use: HashMap::new(),
                order: VecDeque::new(),
                capacity: capacity.max(1),
            })),
        }
    }

    /// Tokens remembered now.
    pub fn len(&self) -> usize {
        self.lock().order.len()
    }

    /// Whether no token is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Most tokens remembered.
    pub fn capacity(&self) -> usize {
        self.lock().capacity
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, UsedSet> {
        // A poisoned lock only means another thread panicked mid-insert; the map and the
        // queue hold the same tags either side of one insert or removal, so it is still a
        // valid set.
        self.inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Records the use of `tag` (of a token expiring at `expire_timestamp`) for `binding`;
    /// the refusal when it was used before by anything other than a repeat of the same UDP
    /// handshake. Tokens expired by `unix_now` are forgotten first.
    /// Whether `tag` may be used for `binding`, without recording anything.
    fn allows(&self, tag: [u8; TAG_BYTES], binding: Binding) -> Result<(), Refusal> {
        self.lock().allows(&tag, binding)
    }

    fn claim(
        &self,
        tag: [u8; TAG_BYTES],
        expire_timestamp: u64,
        binding: Binding,
        unix_now: u64,
    ) -> Result<(), Refusal> {
        let mut set = self.lock();
        // Oldest first: a server issues every token with the same validity, so the front
        // expires first (a longer-lived one at the front only delays the rest, and the
        // capacity still bounds them).
        while let Some(&(oldest, expiry)) = set.order.front()
            && expiry <= unix_now
        {
            set.order.pop_front();
            set.first_use.remove(&oldest);
        }
        if set.first_use.contains_key(&tag) {
            return set.allows(&tag, binding);
        }
        if set.order.len() >= set.capacity
            && let Some((oldest, _)) = set.order.pop_front()
        {
            set.first_use.remove(&oldest);
        }
        set.first_use.insert(tag, binding);
        set.order.push_back((tag, expire_timestamp));
        Ok(())
    }
}

/// Checks connect tokens for one server: the only place a private token is opened.
///
/// Cheap to share: one per UDP [`Server`](crate::Server) and one for the WebSocket and
/// WebTransport endpoint, all built on clones of the same [`UsedTokens`].
pub struct Admission {
    protocol_id: u64,
    cipher: Cipher,
    public_addresses: Vec<SocketAddr>,
    used: UsedTokens,
}

/// What the used set remembers a token by: the tag of its sealed private part, which no one
/// without the server key can make for another token.
fn token_tag(token: &SealedToken<'_>) -> [u8; TAG_BYTES] {
    let mut tag = [0u8; TAG_BYTES];
    tag.copy_from_slice(&token.private_token[PRIVATE_TOKEN_BYTES - TAG_BYTES..]);
    tag
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("protocol_id", &self.protocol_id)
            .field("public_addresses", &self.public_addresses)
            .field("used", &self.used)
            .finish_non_exhaustive()
    }
}

impl Admission {
    /// Admits tokens of `protocol_id` sealed under `key` that name one of
    /// `public_addresses` (every address this server answers to on the transports this
    /// admission serves), recording their use in `used`.
    pub fn new(
        protocol_id: u64,
        key: &Key,
        public_addresses: Vec<SocketAddr>,
        used: UsedTokens,
    ) -> Self {
        Self {
            protocol_id,
            cipher: Cipher::new(key),
            public_addresses,
            used,
        }
    }

    /// The used-token set this admission records in.
    pub fn used_tokens(&self) -> &UsedTokens {
        &self.used
    }

    /// Checks `token` at `unix_now` seconds for a use bound to `binding`: this protocol id,
    /// not expired, sealed under the server key, naming one of this server's addresses, and
    /// not used before (a repeat from the same UDP address excepted). A token that passes
    /// is used up: [`check`](Self::check), then [`claim`](Self::claim).
    pub fn admit(
        &self,
        token: SealedToken<'_>,
        binding: Binding,
        unix_now: u64,
    ) -> Result<Admitted, Refusal> {
        let admitted = self.check(token, binding, unix_now)?;
        self.claim(token, binding, unix_now)?;
        Ok(admitted)
    }

    /// Every check of [`admit`](Self::admit), but the token is not used up. A caller that may still refuse the client for its own
    /// reasons (a full server) checks, decides, and only then [`claim`](Self::claim)s, so a
    /// refused client keeps its token for a server that has room.
    pub fn check(
        &self,
        token: SealedToken<'_>,
        binding: Binding,
        unix_now: u64,
    ) -> Result<Admitted, Refusal> {
        if token.protocol_id != self.protocol_id {
            return Err(Refusal::WrongProtocol {
                found: token.protocol_id,
                expected: self.protocol_id,
            });
        }
        if token.expire_timestamp <= unix_now {
            return Err(Refusal::Expired {
                expire_timestamp: token.expire_timestamp,
                now: unix_now,
            });
        }
        // The public part's addresses and keys are the client's to change; only the sealed
        // part is trusted.
        let private = PrivateToken::open_with(
            token.private_token,
            &self.cipher,
            token.protocol_id,
            token.expire_timestamp,
            token.nonce,
        )
        .map_err(|error| match error {
            TokenError::Tampered => Refusal::Tampered,
            _ => Refusal::PrivateMalformed,
        })?;
        if !private
            .server_addresses
            .iter()
            .any(|address| self.public_addresses.contains(address))
        {
            return Err(Refusal::WrongServer {
                count: self.public_addresses.len(),
            });
        }
        self.used.allows(token_tag(&token), binding)?;
        Ok(Admitted {
            client_id: private.client_id,
            user_data: Box::new(private.user_data),
            client_to_server_key: private.client_to_server_key,
            server_to_client_key: private.server_to_client_key,
            expire_timestamp: token.expire_timestamp,
        })
    }

    /// Uses `token` up for `binding`, unless it was used before (a repeat from the same
    /// UDP address excepted). Only for a token [`check`](Self::check) passed: its tag is
    /// what the set remembers, and only an authentic token's tag is worth remembering.
    pub fn claim(
        &self,
        token: SealedToken<'_>,
        binding: Binding,
        unix_now: u64,
    ) -> Result<(), Refusal> {
        self.used
            .claim(token_tag(&token), token.expire_timestamp, binding, unix_now)
    }

    /// [`admit`](Self::admit) for a whole serialized connect token, as a WebSocket or
    /// WebTransport client sends it in its first message.
    pub fn admit_connect_token(
        &self,
        bytes: &[u8],
        binding: Binding,
        unix_now: u64,
    ) -> Result<Admitted, Refusal> {
        let token =
            ConnectToken::from_bytes(bytes).map_err(|_| Refusal::Malformed { len: bytes.len() })?;
        self.admit(token.sealed(), binding, unix_now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::KEY_BYTES;
    use crate::token::TokenIssuer;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    const PROTOCOL: u64 = 0x7157;
    const NOW: u64 = 1_000;

    fn server() -> SocketAddr {
        "127.0.0.1:8080".parse().unwrap()
    }

    fn issuer() -> TokenIssuer {
        TokenIssuer {
            protocol_id: PROTOCOL,
            key: Key([9; KEY_BYTES]),
            server_addresses: vec![server()],
            validity_seconds: 30,
            timeout_seconds: 5,
        }
    }

    fn admission(used: &UsedTokens) -> Admission {
        Admission::new(PROTOCOL, &Key([9; KEY_BYTES]), vec![server()], used.clone())
    }

    fn token(rng: &mut StdRng, issuer: &TokenIssuer, client_id: u64) -> ConnectToken {
        issuer.issue(rng, NOW, client_id, b"user").unwrap()
    }

    fn bytes(token: &ConnectToken) -> Vec<u8> {
        token.to_bytes().unwrap().to_vec()
    }

    fn address(port: u16) -> Binding {
        Binding::Address(SocketAddr::from(([10, 0, 0, 1], port)))
    }

    #[test]
    fn a_used_token_is_forgotten_once_it_has_expired() {
        let mut rng = StdRng::seed_from_u64(11);
        let used = UsedTokens::new(1_000);
        let admission = admission(&used);
        let first = token(&mut rng, &issuer(), 1);
        admission.admit(first.sealed(), address(1), NOW).unwrap();
        admission
            .admit(token(&mut rng, &issuer(), 2).sealed(), address(2), NOW + 1)
            .unwrap();
        assert_eq!(used.len(), 2);
        // Still within its validity, a replay is refused.
        assert!(matches!(
            admission.admit(first.sealed(), address(3), NOW + 29),
            Err(Refusal::Replayed { .. })
        ));
        // Issued later, valid 30 s from then: the first two have expired by its use.
        let later = issuer().issue(&mut rng, NOW + 40, 3, b"user").unwrap();
        admission
            .admit(later.sealed(), address(4), NOW + 40)
            .unwrap();
        assert_eq!(used.len(), 1, "the expired tokens are forgotten");
        // And the forgotten one is still refused, as expired.
        assert!(matches!(
            admission.admit(first.sealed(), address(1), NOW + 40),
            Err(Refusal::Expired { .. })
        ));
    }

    #[test]
    fn an_admitted_token_says_who_the_client_is() {
        let mut rng = StdRng::seed_from_u64(1);
        let admission = admission(&UsedTokens::new(8));
        let token = token(&mut rng, &issuer(), 42);
        let admitted = admission
            .admit_connect_token(&bytes(&token), Binding::Stream, NOW + 10)
            .unwrap();
        assert_eq!(admitted.client_id, 42);
        assert_eq!(&admitted.user_data[..4], b"user");
        assert_eq!(admitted.expire_timestamp, NOW + 30);
        assert_eq!(admitted.client_to_server_key, token.client_to_server_key);
        assert_eq!(admitted.server_to_client_key, token.server_to_client_key);
    }

    #[test]
    fn a_forged_or_tampered_token_is_refused() {
        let mut rng = StdRng::seed_from_u64(2);
        let admission = admission(&UsedTokens::new(8));
        let mut tampered = bytes(&token(&mut rng, &issuer(), 1));
        // Inside the sealed part (which starts after 13 + 8 + 8 + 8 + 12 bytes).
        tampered[49 + 10] ^= 1;
        assert_eq!(
            admission.admit_connect_token(&tampered, Binding::Stream, NOW),
            Err(Refusal::Tampered)
        );
        // The expiry is authenticated with the seal: moving it forward breaks it.
        let mut extended = token(&mut rng, &issuer(), 1);
        extended.expire_timestamp += 3_600;
        assert_eq!(
            admission.admit(extended.sealed(), Binding::Stream, NOW),
            Err(Refusal::Tampered)
        );
        assert!(
            admission.used_tokens().is_empty(),
            "forged tokens are not recorded"
        );
    }

    #[test]
    fn a_token_sealed_under_another_key_is_refused() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut other_key = issuer();
        other_key.key = Key([1; KEY_BYTES]);
        let token = token(&mut rng, &other_key, 1);
        assert_eq!(
            admission(&UsedTokens::new(8)).admit(token.sealed(), Binding::Stream, NOW),
            Err(Refusal::Tampered)
        );
    }

    #[test]
    fn a_token_of_another_protocol_is_refused() {
        let mut rng = StdRng::seed_from_u64(4);
        let mut other = issuer();
        other.protocol_id = PROTOCOL + 1;
        let token = token(&mut rng, &other, 1);
        let refusal = admission(&UsedTokens::new(8))
            .admit(token.sealed(), Binding::Stream, NOW)
            .unwrap_err();
        assert_eq!(
            refusal,
            Refusal::WrongProtocol {
                found: PROTOCOL + 1,
                expected: PROTOCOL
            }
        );
        assert_eq!(
            refusal.to_string(),
            "token is for protocol 0x7158, expected 0x7157"
        );
    }

    #[test]
    fn an_expired_token_is_refused_from_its_expiry_on() {
        let mut rng = StdRng::seed_from_u64(5);
        let admission = admission(&UsedTokens::new(8));
        let token = token(&mut rng, &issuer(), 1);
        assert_eq!(
            admission.admit(token.sealed(), Binding::Stream, NOW + 30),
            Err(Refusal::Expired {
                expire_timestamp: NOW + 30,
                now: NOW + 30
            })
        );
        assert!(
            admission
                .admit(token.sealed(), Binding::Stream, NOW + 29)
                .is_ok(),
            "a second before its expiry the token is good"
        );
    }

    #[test]
    fn a_token_for_another_server_is_refused() {
        let mut rng = StdRng::seed_from_u64(6);
        let mut elsewhere = issuer();
        elsewhere.server_addresses = vec!["127.0.0.1:9999".parse().unwrap()];
        let token = token(&mut rng, &elsewhere, 1);
        let refusal = admission(&UsedTokens::new(8))
            .admit(token.sealed(), Binding::Stream, NOW)
            .unwrap_err();
        assert_eq!(refusal, Refusal::WrongServer { count: 1 });
        assert_eq!(
            refusal.to_string(),
            "token names none of this server's 1 addresses"
        );
    }

    #[test]
    fn bytes_that_are_not_a_connect_token_are_malformed() {
        let mut rng = StdRng::seed_from_u64(7);
        let admission = admission(&UsedTokens::new(8));
        let whole = bytes(&token(&mut rng, &issuer(), 1));
        for len in [0, 100, CONNECT_TOKEN_BYTES - 1] {
            assert_eq!(
                admission.admit_connect_token(&whole[..len], Binding::Stream, NOW),
                Err(Refusal::Malformed { len }),
                "{len} bytes"
            );
        }
        let mut longer = whole.clone();
        longer.push(0);
        assert_eq!(
            admission.admit_connect_token(&longer, Binding::Stream, NOW),
            Err(Refusal::Malformed {
                len: CONNECT_TOKEN_BYTES + 1
            })
        );
        let mut other_version = whole;
        other_version[0] ^= 1;
        assert_eq!(
            admission.admit_connect_token(&other_version, Binding::Stream, NOW),
            Err(Refusal::Malformed {
                len: CONNECT_TOKEN_BYTES
            })
        );
    }

    #[test]
    fn a_sealed_part_that_does_not_read_is_refused() {
        let key = Key([9; KEY_BYTES]);
        let nonce = [3; NONCE_BYTES];
        // Authenticates under the server key, but names 255 server addresses.
        let mut sealed = [0u8; PRIVATE_TOKEN_BYTES];
        sealed[12] = 255;
        Cipher::new(&key).seal(
            nonce,
            &crate::token::private_token_aad(PROTOCOL, NOW + 30),
            &mut sealed,
        );
        let token = SealedToken {
            protocol_id: PROTOCOL,
            expire_timestamp: NOW + 30,
            nonce,
            private_token: &sealed,
        };
        assert_eq!(
            admission(&UsedTokens::new(8)).admit(token, Binding::Stream, NOW),
            Err(Refusal::PrivateMalformed)
        );
    }

    #[test]
    fn a_stream_token_is_used_once() {
        let mut rng = StdRng::seed_from_u64(8);
        let admission = admission(&UsedTokens::new(8));
        let token = token(&mut rng, &issuer(), 1);
        admission
            .admit(token.sealed(), Binding::Stream, NOW)
            .unwrap();
        assert_eq!(
            admission.admit(token.sealed(), Binding::Stream, NOW),
            Err(Refusal::Replayed { remembered: 8 })
        );
    }

    #[test]
    fn a_udp_request_may_repeat_from_its_address_only() {
        let mut rng = StdRng::seed_from_u64(9);
        let admission = admission(&UsedTokens::new(8));
        let token = token(&mut rng, &issuer(), 1);
        admission.admit(token.sealed(), address(1), NOW).unwrap();
        assert!(
            admission.admit(token.sealed(), address(1), NOW).is_ok(),
            "a lost challenge makes the client repeat its request from the same address"
        );
        assert_eq!(
            admission.admit(token.sealed(), address(2), NOW),
            Err(Refusal::Replayed { remembered: 8 }),
            "another address may not use the token"
        );
    }

    #[test]
    fn a_token_opens_one_transport_through_the_shared_set() {
        let mut rng = StdRng::seed_from_u64(10);
        let used = UsedTokens::new(8);
        // As in the server: one admission per UDP shard, one for the stream endpoint.
        let udp = admission(&used);
        let stream = admission(&used);

        let first_udp = token(&mut rng, &issuer(), 1);
        udp.admit(first_udp.sealed(), address(1), NOW).unwrap();
        assert_eq!(
            stream.admit_connect_token(&bytes(&first_udp), Binding::Stream, NOW),
            Err(Refusal::Replayed { remembered: 8 }),
            "a token used over UDP is refused over WebSocket"
        );

        let first_stream = token(&mut rng, &issuer(), 2);
        stream
            .admit_connect_token(&bytes(&first_stream), Binding::Stream, NOW)
            .unwrap();
        assert_eq!(
            udp.admit(first_stream.sealed(), address(1), NOW),
            Err(Refusal::Replayed { remembered: 8 }),
            "a token used over WebSocket is refused over UDP"
        );
        assert_eq!(used.len(), 2);
    }

    #[test]
    fn the_used_set_is_bounded_and_forgets_the_oldest() {
        let mut rng = StdRng::seed_from_u64(11);
        let admission = admission(&UsedTokens::new(2));
        let tokens: Vec<_> = (0..3).map(|id| token(&mut rng, &issuer(), id)).collect();
        for token in &tokens {
            admission
                .admit(token.sealed(), Binding::Stream, NOW)
                .unwrap();
        }
        assert_eq!(admission.used_tokens().len(), 2);
        assert!(
            admission
                .admit(tokens[0].sealed(), Binding::Stream, NOW)
                .is_ok(),
            "the oldest of 3 was forgotten by a set of 2"
        );
        assert_eq!(
            admission.admit(tokens[2].sealed(), Binding::Stream, NOW),
            Err(Refusal::Replayed { remembered: 2 })
        );
    }
}
