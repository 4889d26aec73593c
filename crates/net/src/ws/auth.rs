//! Checks the connect token a WebSocket client sends as its first message: the same checks
//! as the UDP handshake's request (`tickwire_proto::Server`), in the same order.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Mutex;

use tickwire_proto::crypto::{Key, TAG_BYTES};
use tickwire_proto::token::{
    CONNECT_TOKEN_BYTES, ConnectToken, PrivateToken, TokenError, USER_DATA_BYTES,
};

use super::framing::CloseCode;

/// Why a connect token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The message is not a connect token: wrong length or layout.
    #[error("first message of {len} bytes is not a {CONNECT_TOKEN_BYTES}-byte connect token")]
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
    /// None of the token's server addresses is one of this server's.
    #[error("token names none of this server's {count} addresses")]
    WrongServer {
        /// Addresses this server answers to.
        count: usize,
    },
    /// The token was already used to connect.
    #[error("token already used")]
    Replayed,
}

impl AuthError {
    /// The close code this refusal is reported with.
    pub fn close_code(&self) -> CloseCode {
        match self {
            Self::Malformed { .. } => CloseCode::ProtocolViolation,
            Self::Expired { .. } => CloseCode::TokenExpired,
            Self::Replayed => CloseCode::TokenReplayed,
            Self::WrongProtocol { .. } | Self::Tampered | Self::WrongServer { .. } => {
                CloseCode::BadToken
            }
        }
    }
}

/// What an accepted token says about the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// The client id from the sealed part: the player's id in rooms.
    pub client_id: u64,
    /// Application data from the sealed part.
    pub user_data: Box<[u8; USER_DATA_BYTES]>,
    /// When the token expires, unix seconds.
    pub expire_timestamp: u64,
}

/// Tokens already used, by their 16-byte tag; bounded, the oldest forgotten first.
///
/// A forgotten token can be used again only if it has not expired, so the bound should
/// cover the tokens issued within one validity period (the UDP server's default is 16,384).
struct UsedTokens {
    tags: HashSet<[u8; TAG_BYTES]>,
    order: VecDeque<[u8; TAG_BYTES]>,
    capacity: usize,
}

impl UsedTokens {
    /// Records `tag`; false if it was already there.
    fn claim(&mut self, tag: [u8; TAG_BYTES]) -> bool {
        if self.tags.contains(&tag) {
            return false;
        }
        if self.order.len() >= self.capacity
            && let Some(oldest) = self.order.pop_front()
        {
            self.tags.remove(&oldest);
        }
        self.tags.insert(tag);
        self.order.push_back(tag);
        true
    }
}

/// Opens and checks connect tokens for one server; shared by all its WebSocket connections.
///
/// The used-token set sits behind a mutex, taken once per connection attempt (after the
/// token has authenticated, so forged tokens never reach it) and held for one hash-set
/// insert: never on a message path.
pub struct TokenAuthenticator {
    protocol_id: u64,
    key: Key,
    public_addresses: Vec<SocketAddr>,
    used: Mutex<UsedTokens>,
}

impl std::fmt::Debug for TokenAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenAuthenticator")
            .field("protocol_id", &self.protocol_id)
            .field("public_addresses", &self.public_addresses)
            .finish_non_exhaustive()
    }
}

impl TokenAuthenticator {
    /// An authenticator for tokens of `protocol_id` sealed under `key` that name one of
    /// `public_addresses` (the addresses the token issuer lists for this server's ws or wss
    /// endpoint, and any other it answers to), remembering up to `max_remembered_tokens`
    /// used tokens.
    pub fn new(
        protocol_id: u64,
        key: Key,
        public_addresses: Vec<SocketAddr>,
        max_remembered_tokens: usize,
    ) -> Self {
        Self {
            protocol_id,
            key,
            public_addresses,
            used: Mutex::new(UsedTokens {
                tags: HashSet::new(),
                order: VecDeque::new(),
                capacity: max_remembered_tokens.max(1),
            }),
        }
    }

    /// Checks a first message at `unix_now` seconds: a 2048-byte public connect token of
    /// this protocol id, not expired, whose private part opens under the server key, naming
    /// one of this server's addresses, and never used before. A token that passes is used
    /// up.
    pub fn authenticate(&self, message: &[u8], unix_now: u64) -> Result<Authenticated, AuthError> {
        let token = ConnectToken::from_bytes(message)
            .map_err(|_| AuthError::Malformed { len: message.len() })?;
        if token.protocol_id != self.protocol_id {
            return Err(AuthError::WrongProtocol {
                found: token.protocol_id,
                expected: self.protocol_id,
            });
        }
        if token.expire_timestamp <= unix_now {
            return Err(AuthError::Expired {
                expire_timestamp: token.expire_timestamp,
                now: unix_now,
            });
        }
        // The public part's addresses and keys are the client's to change; only the sealed
        // part is trusted.
        let private = PrivateToken::open(
            &token.private_token,
            &self.key,
            token.protocol_id,
            token.expire_timestamp,
            token.nonce,
        )
        .map_err(|error| match error {
            TokenError::Tampered => AuthError::Tampered,
            _ => AuthError::Malformed { len: message.len() },
        })?;
        if !private
            .server_addresses
            .iter()
            .any(|address| self.public_addresses.contains(address))
        {
            return Err(AuthError::WrongServer {
                count: self.public_addresses.len(),
            });
        }
        let mut tag = [0u8; TAG_BYTES];
        tag.copy_from_slice(&token.private_token[token.private_token.len() - TAG_BYTES..]);
        // A poisoned lock only means another connection's task panicked mid-insert; the set
        // is still a valid set.
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if !used.claim(tag) {
            return Err(AuthError::Replayed);
        }
        Ok(Authenticated {
            client_id: private.client_id,
            user_data: Box::new(private.user_data),
            expire_timestamp: token.expire_timestamp,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use tickwire_proto::crypto::KEY_BYTES;
    use tickwire_proto::token::TokenIssuer;

    const PROTOCOL: u64 = 0x7157;

    fn issuer() -> TokenIssuer {
        TokenIssuer {
            protocol_id: PROTOCOL,
            key: Key([9; KEY_BYTES]),
            server_addresses: vec!["127.0.0.1:8080".parse().unwrap()],
            validity_seconds: 30,
            timeout_seconds: 5,
        }
    }

    fn authenticator() -> TokenAuthenticator {
        TokenAuthenticator::new(
            PROTOCOL,
            Key([9; KEY_BYTES]),
            vec!["127.0.0.1:8080".parse().unwrap()],
            2,
        )
    }

    fn token(rng: &mut StdRng, issuer: &TokenIssuer, client_id: u64) -> Vec<u8> {
        let token = issuer.issue(rng, 1_000, client_id, b"user").unwrap();
        token.to_bytes().unwrap().to_vec()
    }

    #[test]
    fn a_valid_token_is_accepted_once() {
        let mut rng = StdRng::seed_from_u64(1);
        let auth = authenticator();
        let bytes = token(&mut rng, &issuer(), 42);
        let accepted = auth.authenticate(&bytes, 1_010).unwrap();
        assert_eq!(accepted.client_id, 42);
        assert_eq!(&accepted.user_data[..4], b"user");
        assert_eq!(accepted.expire_timestamp, 1_030);
        assert_eq!(auth.authenticate(&bytes, 1_010), Err(AuthError::Replayed));
    }

    #[test]
    fn each_check_refuses_with_its_reason() {
        let mut rng = StdRng::seed_from_u64(2);
        let auth = authenticator();
        let issuer = issuer();

        let bytes = token(&mut rng, &issuer, 1);
        assert_eq!(
            auth.authenticate(&bytes, 1_030),
            Err(AuthError::Expired {
                expire_timestamp: 1_030,
                now: 1_030
            })
        );
        assert_eq!(
            auth.authenticate(&bytes[..100], 1_000),
            Err(AuthError::Malformed { len: 100 })
        );

        let mut tampered = token(&mut rng, &issuer, 1);
        tampered[49 + 10] ^= 1;
        assert_eq!(
            auth.authenticate(&tampered, 1_000),
            Err(AuthError::Tampered)
        );

        let mut other_protocol = issuer.clone();
        other_protocol.protocol_id = PROTOCOL + 1;
        let bytes = token(&mut rng, &other_protocol, 1);
        assert!(matches!(
            auth.authenticate(&bytes, 1_000),
            Err(AuthError::WrongProtocol { .. })
        ));

        let mut elsewhere = issuer.clone();
        elsewhere.server_addresses = vec!["127.0.0.1:9999".parse().unwrap()];
        let bytes = token(&mut rng, &elsewhere, 1);
        assert_eq!(
            auth.authenticate(&bytes, 1_000),
            Err(AuthError::WrongServer { count: 1 })
        );

        let mut other_key = issuer;
        other_key.key = Key([1; KEY_BYTES]);
        let bytes = token(&mut rng, &other_key, 1);
        assert_eq!(auth.authenticate(&bytes, 1_000), Err(AuthError::Tampered));
    }

    #[test]
    fn refusals_map_to_their_close_codes() {
        assert_eq!(
            AuthError::Malformed { len: 3 }.close_code(),
            CloseCode::ProtocolViolation
        );
        assert_eq!(AuthError::Tampered.close_code(), CloseCode::BadToken);
        assert_eq!(
            AuthError::WrongServer { count: 1 }.close_code(),
            CloseCode::BadToken
        );
        assert_eq!(AuthError::Replayed.close_code(), CloseCode::TokenReplayed);
        assert_eq!(
            AuthError::Expired {
                expire_timestamp: 1,
                now: 2
            }
            .close_code(),
            CloseCode::TokenExpired
        );
    }

    #[test]
    fn the_used_set_is_bounded_and_forgets_the_oldest() {
        let mut rng = StdRng::seed_from_u64(3);
        let auth = authenticator();
        let issuer = issuer();
        let tokens: Vec<_> = (0..3).map(|id| token(&mut rng, &issuer, id)).collect();
        for bytes in &tokens {
            auth.authenticate(bytes, 1_000).unwrap();
        }
        assert_eq!(auth.used.lock().unwrap().tags.len(), 2);
        assert!(
            auth.authenticate(&tokens[0], 1_000).is_ok(),
            "the oldest of 3 was forgotten by a set of 2"
        );
        assert_eq!(
            auth.authenticate(&tokens[2], 1_000),
            Err(AuthError::Replayed)
        );
    }
}
