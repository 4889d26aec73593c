//! Connect tokens: what the server's HTTP side hands a client so it may connect over UDP.
//!
//! A token has a public part the client reads (server addresses, expiry, timeout and the two
//! session keys) and a private part sealed under a key only the servers hold. The client
//! cannot read or alter the private part; it forwards it in its connection request, and the
//! server trusts what it finds inside (client id, keys, user data) because only a server could
//! have sealed it. The byte layouts are in `docs/PROTOCOL.md`.

use std::net::SocketAddr;

use crate::bytes_io::{ADDRESS_BYTES_MAX, ByteReader, ByteWriter};
use crate::crypto::{Cipher, KEY_BYTES, Key, NONCE_BYTES, TAG_BYTES};

/// Identifies the protocol and its version; the first bytes of a connect token and a
/// connection request, and part of every packet's associated data.
pub const VERSION_INFO: [u8; 13] = *b"TICKWIRE 1.1\0";
/// Bytes of a serialized [`ConnectToken`].
pub const CONNECT_TOKEN_BYTES: usize = 2048;
/// Bytes of the sealed private part, tag included.
pub const PRIVATE_TOKEN_BYTES: usize = 1024;
/// Bytes of application data carried in the private part (player id, room ticket, …).
pub const USER_DATA_BYTES: usize = 256;
/// Most server addresses one token may name.
pub const MAX_SERVER_ADDRESSES: usize = 32;

/// Why a token could not be issued, read or accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The bytes are not a token of this protocol version.
    #[error("malformed token")]
    Malformed,
    /// The token was issued for another protocol id.
    #[error("token is for protocol {found:#x}, expected {expected:#x}")]
    WrongProtocol {
        /// Protocol id in the token.
        found: u64,
        /// Protocol id expected.
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
    /// The private part does not authenticate: tampered, or sealed under another key.
    #[error("private token does not authenticate")]
    Tampered,
    /// More server addresses than a token holds, or none.
    #[error("{count} server addresses; a token names 1 to {MAX_SERVER_ADDRESSES}")]
    AddressCount {
        /// Addresses given.
        count: usize,
    },
    /// More user data than a token holds.
    #[error("user data of {len} bytes exceeds {USER_DATA_BYTES}")]
    UserDataTooLong {
        /// Bytes given.
        len: usize,
    },
}

/// The sealed part of a connect token: what the server learns about the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateToken {
    /// The client's id, unique among connected clients (the issuer's choice).
    pub client_id: u64,
    /// Seconds of silence after which the handshake gives up.
    pub timeout_seconds: u32,
    /// Server addresses the token is valid for.
    pub server_addresses: Vec<SocketAddr>,
    /// Key for packets from the client to the server.
    pub client_to_server_key: Key,
    /// Key for packets from the server to the client.
    pub server_to_client_key: Key,
    /// Application data, zero-padded.
    pub user_data: [u8; USER_DATA_BYTES],
}

/// Associated data binding a sealed private token to its protocol and expiry.
pub(crate) fn private_token_aad(protocol_id: u64, expire_timestamp: u64) -> [u8; 29] {
    let mut aad = [0u8; 29];
    aad[..13].copy_from_slice(&VERSION_INFO);
    aad[13..21].copy_from_slice(&protocol_id.to_le_bytes());
    aad[21..].copy_from_slice(&expire_timestamp.to_le_bytes());
    aad
}

impl PrivateToken {
    /// Seals the token under `key`; `protocol_id` and `expire_timestamp` are authenticated
    /// with it, so neither can be changed in the public part without the seal failing.
    pub fn seal(
        &self,
        key: &Key,
        protocol_id: u64,
        expire_timestamp: u64,
        nonce: [u8; NONCE_BYTES],
    ) -> Result<[u8; PRIVATE_TOKEN_BYTES], TokenError> {
        let mut sealed = [0u8; PRIVATE_TOKEN_BYTES];
        let count = self.server_addresses.len();
        if count == 0 || count > MAX_SERVER_ADDRESSES {
            return Err(TokenError::AddressCount { count });
        }
        let mut writer = ByteWriter::new(&mut sealed[..PRIVATE_TOKEN_BYTES - TAG_BYTES]);
        let written = (|| {
            writer.put_u64(self.client_id)?;
            writer.put_u32(self.timeout_seconds)?;
            writer.put_addresses(&self.server_addresses, MAX_SERVER_ADDRESSES)?;
            writer.put_slice(&self.client_to_server_key.0)?;
            writer.put_slice(&self.server_to_client_key.0)?;
            writer.put_slice(&self.user_data)
        })();
        // The layout's largest size (941 bytes) fits the 1008 plaintext bytes.
        debug_assert!(written.is_some());
        Cipher::new(key).seal(
            nonce,
            &private_token_aad(protocol_id, expire_timestamp),
            &mut sealed,
        );
        Ok(sealed)
    }

    /// Opens a sealed token; [`TokenError::Tampered`] unless it was sealed under `key` with
    /// this protocol id, expiry and nonce.
    pub fn open(
        sealed: &[u8; PRIVATE_TOKEN_BYTES],
        key: &Key,
        protocol_id: u64,
        expire_timestamp: u64,
        nonce: [u8; NONCE_BYTES],
    ) -> Result<Self, TokenError> {
        Self::open_with(
            sealed,
            &Cipher::new(key),
            protocol_id,
            expire_timestamp,
            nonce,
        )
    }

    /// [`open`](Self::open) with the key already set up (the server opens every request).
    pub(crate) fn open_with(
        sealed: &[u8; PRIVATE_TOKEN_BYTES],
        cipher: &Cipher,
        protocol_id: u64,
        expire_timestamp: u64,
        nonce: [u8; NONCE_BYTES],
    ) -> Result<Self, TokenError> {
        let mut plaintext = *sealed;
        let aad = private_token_aad(protocol_id, expire_timestamp);
        let len = cipher
            .open(nonce, &aad, &mut plaintext)
            .ok_or(TokenError::Tampered)?;
        let mut reader = ByteReader::new(&plaintext[..len]);
        Self::read(&mut reader).ok_or(TokenError::Malformed)
    }

    fn read(reader: &mut ByteReader<'_>) -> Option<Self> {
        let client_id = reader.get_u64()?;
        let timeout_seconds = reader.get_u32()?;
        let server_addresses = reader.get_addresses(MAX_SERVER_ADDRESSES)?;
        Some(Self {
            client_id,
            timeout_seconds,
            server_addresses,
            client_to_server_key: Key(reader.get_array()?),
            server_to_client_key: Key(reader.get_array()?),
            user_data: reader.get_array()?,
        })
    }
}

/// What a client receives from the server's HTTP side and needs to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectToken {
    /// The game's protocol id; servers refuse tokens for other ids.
    pub protocol_id: u64,
    /// Unix seconds the token was issued.
    pub create_timestamp: u64,
    /// Unix seconds after which servers refuse the token.
    pub expire_timestamp: u64,
    /// Nonce the private part was sealed with.
    pub nonce: [u8; NONCE_BYTES],
    /// The sealed private part, forwarded verbatim in the connection request.
    pub private_token: [u8; PRIVATE_TOKEN_BYTES],
    /// Seconds of silence after which the handshake gives up.
    pub timeout_seconds: u32,
    /// Servers to try, in order.
    pub server_addresses: Vec<SocketAddr>,
    /// Key for packets from the client to the server.
    pub client_to_server_key: Key,
    /// Key for packets from the server to the client.
    pub server_to_client_key: Key,
}

impl ConnectToken {
    /// The token as the fixed-size bytes the HTTP side sends.
    pub fn to_bytes(&self) -> Result<Box<[u8; CONNECT_TOKEN_BYTES]>, TokenError> {
        let count = self.server_addresses.len();
        if count == 0 || count > MAX_SERVER_ADDRESSES {
            return Err(TokenError::AddressCount { count });
        }
        let mut bytes = Box::new([0u8; CONNECT_TOKEN_BYTES]);
        let mut writer = ByteWriter::new(&mut bytes[..]);
        let written = (|| {
            writer.put_slice(&VERSION_INFO)?;
            writer.put_u64(self.protocol_id)?;
            writer.put_u64(self.create_timestamp)?;
            writer.put_u64(self.expire_timestamp)?;
            writer.put_slice(&self.nonce)?;
            writer.put_slice(&self.private_token)?;
            writer.put_u32(self.timeout_seconds)?;
            writer.put_addresses(&self.server_addresses, MAX_SERVER_ADDRESSES)?;
            writer.put_slice(&self.client_to_server_key.0)?;
            writer.put_slice(&self.server_to_client_key.0)
        })();
        // At most 1750 bytes of 2048.
        debug_assert!(written.is_some());
        Ok(bytes)
    }

    /// Reads a token; the private part stays sealed.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, TokenError> {
        if bytes.len() != CONNECT_TOKEN_BYTES {
            return Err(TokenError::Malformed);
        }
        let mut reader = ByteReader::new(bytes);
        let token = (|| {
            if reader.get_array::<13>()? != VERSION_INFO {
                return None;
            }
            let protocol_id = reader.get_u64()?;
            let create_timestamp = reader.get_u64()?;
            let expire_timestamp = reader.get_u64()?;
            let nonce = reader.get_array()?;
            let private_token = reader.get_array()?;
            let timeout_seconds = reader.get_u32()?;
            let server_addresses = reader.get_addresses(MAX_SERVER_ADDRESSES)?;
            Some(Self {
                protocol_id,
                create_timestamp,
                expire_timestamp,
                nonce,
                private_token,
                timeout_seconds,
                server_addresses,
                client_to_server_key: Key(reader.get_array()?),
                server_to_client_key: Key(reader.get_array()?),
            })
        })();
        token.ok_or(TokenError::Malformed)
    }
}

/// Issues connect tokens; lives with the server's HTTP side and shares `key` with the UDP
/// servers named in `server_addresses`.
#[derive(Debug, Clone)]
pub struct TokenIssuer {
    /// The game's protocol id.
    pub protocol_id: u64,
    /// Key that seals private tokens; the servers open them with the same key.
    pub key: Key,
    /// Where clients should connect, in order of preference.
    pub server_addresses: Vec<SocketAddr>,
    /// How long a token stays valid after issue.
    pub validity_seconds: u64,
    /// Seconds of silence after which a handshake gives up.
    pub timeout_seconds: u32,
}

impl TokenIssuer {
    /// A token for `client_id` carrying `user_data` (at most [`USER_DATA_BYTES`]), with fresh
    /// random session keys and nonce.
    pub fn issue(
        &self,
        rng: &mut (impl rand::CryptoRng + ?Sized),
        unix_now: u64,
        client_id: u64,
        user_data: &[u8],
    ) -> Result<ConnectToken, TokenError> {
        if user_data.len() > USER_DATA_BYTES {
            return Err(TokenError::UserDataTooLong {
                len: user_data.len(),
            });
        }
        let mut padded = [0u8; USER_DATA_BYTES];
        padded[..user_data.len()].copy_from_slice(user_data);
        let mut nonce = [0u8; NONCE_BYTES];
        rng.fill_bytes(&mut nonce);
        let private = PrivateToken {
            client_id,
            timeout_seconds: self.timeout_seconds,
            server_addresses: self.server_addresses.clone(),
            client_to_server_key: Key::random(rng),
            server_to_client_key: Key::random(rng),
            user_data: padded,
        };
        let expire_timestamp = unix_now.saturating_add(self.validity_seconds);
        let sealed = private.seal(&self.key, self.protocol_id, expire_timestamp, nonce)?;
        Ok(ConnectToken {
            protocol_id: self.protocol_id,
            create_timestamp: unix_now,
            expire_timestamp,
            nonce,
            private_token: sealed,
            timeout_seconds: self.timeout_seconds,
            server_addresses: private.server_addresses,
            client_to_server_key: private.client_to_server_key,
            server_to_client_key: private.server_to_client_key,
        })
    }
}

// Compile-time check of the size budget stated in the docs.
const _: () = {
    let private =
        8 + 4 + 1 + MAX_SERVER_ADDRESSES * ADDRESS_BYTES_MAX + 2 * KEY_BYTES + USER_DATA_BYTES;
    assert!(private <= PRIVATE_TOKEN_BYTES - TAG_BYTES);
    let public = 13
        + 8 * 3
        + NONCE_BYTES
        + PRIVATE_TOKEN_BYTES
        + 4
        + 1
        + MAX_SERVER_ADDRESSES * ADDRESS_BYTES_MAX
        + 2 * KEY_BYTES;
    assert!(public <= CONNECT_TOKEN_BYTES);
};

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn issuer() -> TokenIssuer {
        TokenIssuer {
            protocol_id: 0x7157,
            key: Key([3; KEY_BYTES]),
            server_addresses: vec![
                "127.0.0.1:40000".parse().unwrap(),
                "[::1]:40001".parse().unwrap(),
            ],
            validity_seconds: 30,
            timeout_seconds: 5,
        }
    }

    #[test]
    fn an_issued_token_round_trips_and_its_private_part_opens_on_the_server() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let issuer = issuer();
        let token = issuer.issue(&mut rng, 1_000, 42, b"player:7").unwrap();
        assert_eq!(token.expire_timestamp, 1_030);

        let bytes = token.to_bytes().unwrap();
        let read = ConnectToken::from_bytes(&bytes[..]).unwrap();
        assert_eq!(read, token);

        let private = PrivateToken::open(
            &read.private_token,
            &issuer.key,
            read.protocol_id,
            read.expire_timestamp,
            read.nonce,
        )
        .unwrap();
        assert_eq!(private.client_id, 42);
        assert_eq!(&private.user_data[..8], b"player:7");
        assert_eq!(private.client_to_server_key, token.client_to_server_key);
        assert_eq!(private.server_addresses, issuer.server_addresses);
    }

    #[test]
    fn changing_the_expiry_or_protocol_in_the_public_part_breaks_the_seal() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let issuer = issuer();
        let token = issuer.issue(&mut rng, 1_000, 1, &[]).unwrap();
        let open = |protocol_id, expire| {
            PrivateToken::open(
                &token.private_token,
                &issuer.key,
                protocol_id,
                expire,
                token.nonce,
            )
        };
        assert_eq!(
            open(token.protocol_id, token.expire_timestamp + 3600),
            Err(TokenError::Tampered)
        );
        assert_eq!(
            open(token.protocol_id + 1, token.expire_timestamp),
            Err(TokenError::Tampered)
        );
        let wrong_key = PrivateToken::open(
            &token.private_token,
            &Key([4; KEY_BYTES]),
            token.protocol_id,
            token.expire_timestamp,
            token.nonce,
        );
        assert_eq!(wrong_key, Err(TokenError::Tampered));
    }

    #[test]
    fn bad_inputs_are_refused_with_their_reason() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let mut issuer = issuer();
        assert_eq!(
            issuer.issue(&mut rng, 0, 1, &[0; USER_DATA_BYTES + 1]),
            Err(TokenError::UserDataTooLong { len: 257 })
        );
        issuer.server_addresses.clear();
        assert_eq!(
            issuer.issue(&mut rng, 0, 1, &[]),
            Err(TokenError::AddressCount { count: 0 })
        );
        assert_eq!(
            ConnectToken::from_bytes(&[0; 10]),
            Err(TokenError::Malformed)
        );
        assert_eq!(
            ConnectToken::from_bytes(&[0; CONNECT_TOKEN_BYTES]),
            Err(TokenError::Malformed),
            "wrong version info"
        );
    }
}
