//! The login of a stream transport (WebSocket, WebTransport): the server's challenge and
//! the client's answer, which proves it holds the connect token's client-to-server key.
//!
//! The sealed private token also travels in clear in the UDP request, so over a stream the
//! token alone must not be enough. Right after the transport opens, the server sends a
//! random 32-byte [`ServerNonce`]; the client's first message is its public connect token
//! followed by a [`proof`]: HMAC-SHA256 under the token's client-to-server key over
//! [`PROOF_LABEL`] ‖ the nonce ‖ the token's 2048 bytes. The server learns that key only by
//! opening the sealed part, so [`Admission::check_login`] checks the proof after the token's
//! checks and before the token is used up: a login refused for its proof leaves the token
//! unused (`docs/PROTOCOL.md`, "WebSocket transport", "Connecting").
//!
//! ```
//! # use tickwire_proto::login::{self, ServerNonce};
//! # use tickwire_proto::crypto::Key;
//! # let token = [0u8; 2048];
//! let nonce = ServerNonce([7; 32]); // from the server's first message
//! let key = Key([1; 32]); // the public token's client-to-server key
//! let message = login::login_message(&token, &key, &nonce);
//! assert_eq!(message.len(), login::LOGIN_BYTES);
//! ```

use ring::hmac;

use crate::admission::{Admission, Admitted, Binding, Refusal};
use crate::crypto::Key;
use crate::token::{CONNECT_TOKEN_BYTES, ConnectToken, TokenError};

/// Bytes of the server's challenge: the whole of its first message (WebSocket) or frame
/// body (WebTransport).
pub const SERVER_NONCE_BYTES: usize = 32;

/// Bytes of a proof (an HMAC-SHA256 tag).
pub const PROOF_BYTES: usize = 32;

/// Bytes of a client's login: the public connect token, then the proof.
pub const LOGIN_BYTES: usize = CONNECT_TOKEN_BYTES + PROOF_BYTES;

/// The domain-separation label the proof's HMAC input starts with: 24 ASCII bytes, no
/// terminator. No other tickwire MAC or AEAD input starts with it.
pub const PROOF_LABEL: &[u8; 24] = b"tickwire stream login v1";

/// The server's challenge to one stream connection: random, drawn by the driver for each
/// connection and never reused.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ServerNonce(pub [u8; SERVER_NONCE_BYTES]);

impl ServerNonce {
    /// A fresh random nonce.
    pub fn random(rng: &mut (impl rand::CryptoRng + ?Sized)) -> Self {
        let mut nonce = [0u8; SERVER_NONCE_BYTES];
        rng.fill_bytes(&mut nonce);
        Self(nonce)
    }

    /// The nonce read from the server's first message: `None` unless it is exactly
    /// [`SERVER_NONCE_BYTES`] long.
    pub fn read(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(Self)
    }
}

impl std::fmt::Debug for ServerNonce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerNonce(..)")
    }
}

/// What the proof's HMAC covers: `PROOF_LABEL ‖ nonce ‖ token`.
fn proof_input(nonce: &ServerNonce, token: &[u8]) -> Vec<u8> {
    [&PROOF_LABEL[..], &nonce.0, token].concat()
}

/// The proof of possession for `token` (the public connect token's bytes, as sent) answering
/// `nonce`: HMAC-SHA256 under `client_to_server_key` over `PROOF_LABEL ‖ nonce ‖ token`.
pub fn proof(client_to_server_key: &Key, nonce: &ServerNonce, token: &[u8]) -> [u8; PROOF_BYTES] {
    let key = hmac::Key::new(hmac::HMAC_SHA256, &client_to_server_key.0);
    let mut out = [0u8; PROOF_BYTES];
    out.copy_from_slice(hmac::sign(&key, &proof_input(nonce, token)).as_ref());
    out
}

/// Whether `proof` is [`proof`]'s answer, compared in constant time.
pub fn verify(client_to_server_key: &Key, nonce: &ServerNonce, token: &[u8], proof: &[u8]) -> bool {
    let key = hmac::Key::new(hmac::HMAC_SHA256, &client_to_server_key.0);
    hmac::verify(&key, &proof_input(nonce, token), proof).is_ok()
}

/// A client's login message: `token` then its proof under `client_to_server_key` for
/// `nonce`.
pub fn login_message(
    token: &[u8; CONNECT_TOKEN_BYTES],
    client_to_server_key: &Key,
    nonce: &ServerNonce,
) -> Vec<u8> {
    let mut message = Vec::with_capacity(LOGIN_BYTES);
    message.extend_from_slice(token);
    message.extend_from_slice(&proof(client_to_server_key, nonce, token));
    message
}

/// [`login_message`] for a serialized public token, whose own client-to-server key signs
/// it; an error if `token` does not read as a connect token.
pub fn login_for_token(token: &[u8], nonce: &ServerNonce) -> Result<Vec<u8>, TokenError> {
    let parsed = ConnectToken::from_bytes(token)?;
    let token: &[u8; CONNECT_TOKEN_BYTES] = token.try_into().map_err(|_| TokenError::Malformed)?;
    Ok(login_message(token, &parsed.client_to_server_key, nonce))
}

/// Why a stream client's login was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginRefusal {
    /// The connect token was refused, as any transport refuses it.
    #[error(transparent)]
    Token(#[from] Refusal),
    /// The message is a bare connect token: no proof follows it (a client of the protocol
    /// before proofs, or one that skipped the challenge).
    #[error(
        "connect token without a proof of possession: the first message is the {CONNECT_TOKEN_BYTES}-byte token and a {PROOF_BYTES}-byte proof"
    )]
    NoProof,
    /// The proof does not verify under the token's client-to-server key for this
    /// connection's nonce: the sender does not hold the key, or answered another challenge.
    #[error("proof of possession does not verify under the token's client-to-server key")]
    WrongProof,
}

/// A login whose token and proof passed every check but the last: the token is not used up
/// until [`Admission::claim_login`].
#[derive(Debug)]
pub struct CheckedLogin {
    /// What the token's sealed part says.
    pub admitted: Admitted,
    token: ConnectToken,
}

impl Admission {
    /// Checks a stream client's login `message` (its first WebSocket message or
    /// WebTransport frame) answering `nonce`: the token's checks as
    /// [`check`](Self::check) makes them for [`Binding::Stream`], then the proof, with the
    /// key the sealed part holds. Nothing is used up.
    pub fn check_login(
        &self,
        message: &[u8],
        nonce: &ServerNonce,
        unix_now: u64,
    ) -> Result<CheckedLogin, LoginRefusal> {
        if message.len() == CONNECT_TOKEN_BYTES {
            return Err(LoginRefusal::NoProof);
        }
        let malformed = Refusal::Malformed { len: message.len() };
        let Some((token, proof)) = message.split_at_checked(CONNECT_TOKEN_BYTES) else {
            return Err(malformed.into());
        };
        if proof.len() != PROOF_BYTES {
            return Err(malformed.into());
        }
        let parsed = ConnectToken::from_bytes(token).map_err(|_| malformed)?;
        let admitted = self.check(parsed.sealed(), Binding::Stream, unix_now)?;
        if !verify(&admitted.client_to_server_key, nonce, token, proof) {
            return Err(LoginRefusal::WrongProof);
        }
        Ok(CheckedLogin {
            admitted,
            token: parsed,
        })
    }

    /// Uses a checked login's token up (it may have been used meanwhile, by another
    /// connection).
    pub fn claim_login(&self, login: &CheckedLogin, unix_now: u64) -> Result<(), Refusal> {
        self.claim(login.token.sealed(), Binding::Stream, unix_now)
    }

    /// [`check_login`](Self::check_login), then [`claim_login`](Self::claim_login).
    pub fn admit_login(
        &self,
        message: &[u8],
        nonce: &ServerNonce,
        unix_now: u64,
    ) -> Result<Admitted, LoginRefusal> {
        let login = self.check_login(message, nonce, unix_now)?;
        self.claim_login(&login, unix_now)?;
        Ok(login.admitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::UsedTokens;
    use crate::crypto::KEY_BYTES;
    use crate::token::TokenIssuer;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    const PROTOCOL: u64 = 0x7157;
    const NOW: u64 = 1_000;
    const SERVER_KEY: Key = Key([9; KEY_BYTES]);

    fn issuer() -> TokenIssuer {
        TokenIssuer {
            protocol_id: PROTOCOL,
            key: SERVER_KEY,
            server_addresses: vec!["127.0.0.1:8080".parse().unwrap()],
            validity_seconds: 30,
            timeout_seconds: 5,
        }
    }

    fn admission(used: &UsedTokens) -> Admission {
        Admission::new(
            PROTOCOL,
            &SERVER_KEY,
            issuer().server_addresses,
            used.clone(),
        )
    }

    fn token(seed: u64) -> (ConnectToken, Box<[u8; CONNECT_TOKEN_BYTES]>) {
        let token = issuer()
            .issue(&mut StdRng::seed_from_u64(seed), NOW, 42, b"user")
            .unwrap();
        let bytes = token.to_bytes().unwrap();
        (token, bytes)
    }

    fn unhex(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn the_golden_vector_holds() {
        let file: serde_json::Value =
            serde_json::from_str(include_str!("../tests/vectors/stream_login.json")).unwrap();
        let vectors = file["vectors"].as_array().unwrap();
        assert!(!vectors.is_empty(), "stream_login.json has its vectors");
        for vector in vectors {
            let field = |name: &str| unhex(vector[name].as_str().unwrap());
            let key = Key(field("client_to_server_key").try_into().unwrap());
            let nonce = ServerNonce::read(&field("server_nonce")).unwrap();
            let token = field("token");
            let expected = field("proof");
            assert_eq!(
                proof(&key, &nonce, &token).to_vec(),
                expected,
                "{}: the proof of the vector",
                vector["name"]
            );
            assert!(verify(&key, &nonce, &token, &expected));
        }
    }

    #[test]
    fn the_label_and_every_input_byte_count() {
        let key = Key([1; KEY_BYTES]);
        let nonce = ServerNonce([2; SERVER_NONCE_BYTES]);
        let token = [3u8; 64];
        let good = proof(&key, &nonce, &token);
        // HMAC-SHA256 of the concatenation, independently keyed.
        let tag = hmac::sign(
            &hmac::Key::new(hmac::HMAC_SHA256, &key.0),
            &[&PROOF_LABEL[..], &nonce.0, &token].concat(),
        );
        assert_eq!(&good[..], tag.as_ref());
        assert!(
            !verify(&Key([4; KEY_BYTES]), &nonce, &token, &good),
            "another key"
        );
        assert!(
            !verify(&key, &ServerNonce([5; SERVER_NONCE_BYTES]), &token, &good),
            "another challenge"
        );
        assert!(!verify(&key, &nonce, &token[1..], &good), "another token");
        assert!(!verify(&key, &nonce, &token, &good[..31]), "a short proof");
    }

    #[test]
    fn a_login_with_its_proof_is_admitted() {
        let (token, bytes) = token(1);
        let nonce = ServerNonce([6; SERVER_NONCE_BYTES]);
        let message = login_message(&bytes, &token.client_to_server_key, &nonce);
        assert_eq!(message, login_for_token(&bytes[..], &nonce).unwrap());
        let admitted = admission(&UsedTokens::new(8))
            .admit_login(&message, &nonce, NOW)
            .unwrap();
        assert_eq!(admitted.client_id, 42);
    }

    #[test]
    fn the_sealed_token_alone_or_a_wrong_proof_is_refused_and_leaves_the_token_unused() {
        let used = UsedTokens::new(8);
        let admission = admission(&used);
        let (token, bytes) = token(2);
        let nonce = ServerNonce([6; SERVER_NONCE_BYTES]);
        assert_eq!(
            admission.admit_login(&bytes[..], &nonce, NOW),
            Err(LoginRefusal::NoProof),
            "the bare token, as an observer of the UDP request could send it"
        );
        let cases = [
            ("a zero proof", [&bytes[..], &[0; PROOF_BYTES]].concat()),
            (
                "a proof under the server-to-client key",
                login_message(&bytes, &token.server_to_client_key, &nonce),
            ),
            (
                "a proof for another challenge",
                login_message(
                    &bytes,
                    &token.client_to_server_key,
                    &ServerNonce([7; SERVER_NONCE_BYTES]),
                ),
            ),
        ];
        for (what, message) in cases {
            assert_eq!(
                admission.admit_login(&message, &nonce, NOW),
                Err(LoginRefusal::WrongProof),
                "{what}"
            );
        }
        assert!(used.is_empty(), "a refused proof does not use the token up");
        let good = login_message(&bytes, &token.client_to_server_key, &nonce);
        assert!(admission.admit_login(&good, &nonce, NOW).is_ok());
        assert_eq!(
            admission.admit_login(&good, &nonce, NOW),
            Err(LoginRefusal::Token(Refusal::Replayed { remembered: 8 })),
            "and then it is used once"
        );
    }

    #[test]
    fn a_bad_token_is_refused_for_the_token_before_its_proof() {
        let admission = admission(&UsedTokens::new(8));
        let (token, bytes) = token(3);
        let nonce = ServerNonce([6; SERVER_NONCE_BYTES]);
        let mut tampered = *bytes;
        tampered[49 + 10] ^= 1;
        let message = login_message(&tampered, &token.client_to_server_key, &nonce);
        assert_eq!(
            admission.admit_login(&message, &nonce, NOW),
            Err(LoginRefusal::Token(Refusal::Tampered))
        );
        let message = login_message(&bytes, &token.client_to_server_key, &nonce);
        assert_eq!(
            admission.admit_login(&message, &nonce, NOW + 30),
            Err(LoginRefusal::Token(Refusal::Expired {
                expire_timestamp: NOW + 30,
                now: NOW + 30
            }))
        );
    }

    #[test]
    fn messages_of_other_lengths_or_layouts_are_malformed() {
        let admission = admission(&UsedTokens::new(8));
        let (token, bytes) = token(4);
        let nonce = ServerNonce([6; SERVER_NONCE_BYTES]);
        let whole = login_message(&bytes, &token.client_to_server_key, &nonce);
        for len in [
            0,
            100,
            CONNECT_TOKEN_BYTES - 1,
            CONNECT_TOKEN_BYTES + 1,
            LOGIN_BYTES - 1,
        ] {
            assert_eq!(
                admission.admit_login(&whole[..len], &nonce, NOW),
                Err(LoginRefusal::Token(Refusal::Malformed { len })),
                "{len} bytes"
            );
        }
        let mut longer = whole.clone();
        longer.push(0);
        assert_eq!(
            admission.admit_login(&longer, &nonce, NOW),
            Err(LoginRefusal::Token(Refusal::Malformed {
                len: LOGIN_BYTES + 1
            }))
        );
        let mut other_version = whole;
        other_version[0] ^= 1;
        assert_eq!(
            admission.admit_login(&other_version, &nonce, NOW),
            Err(LoginRefusal::Token(Refusal::Malformed { len: LOGIN_BYTES }))
        );
    }
}
