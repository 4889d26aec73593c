//! Who a player is: a guest under a generated id, or an identity signed by the game's
//! backend (`auth.mode = "shared_secret"`); and the session string that lets a player prove
//! it is them again, to get their seat back with a fresh token, until `auth.session_ttl_secs`
//! after it was first issued.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::Rng as _;
use ring::hmac;
pub use tickwire_proto::matchmake::SignedIdentity;

use crate::config::{AuthConfig, AuthMode};
use crate::credentials::constant_time_eq;
use crate::room::PlayerId;
use crate::worker::MAX_TICKET_NAME_BYTES;

/// Player ids stay below 2^53 so JavaScript numbers hold them exactly.
pub const MAX_PLAYER_ID: u64 = (1 << 53) - 1;
/// Bytes of HMAC-SHA256 kept in a session string: 128 bits, ample against forgery.
const SESSION_TAG_BYTES: usize = 16;
/// A session's fixed fields: player id (u64 LE), issue time (u64 LE), name length (u8).
const SESSION_HEAD_BYTES: usize = 17;
/// The longest session string: the head, the longest name and the tag, in base64.
const MAX_SESSION_CHARS: usize =
    (SESSION_HEAD_BYTES + MAX_TICKET_NAME_BYTES + SESSION_TAG_BYTES).div_ceil(3) * 4;

/// A player as the server knows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Their id.
    pub player: PlayerId,
    /// The name shown to others.
    pub name: String,
}

/// Why an identity was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// The name is empty, too long, or has control characters.
    #[error("name must be 1 to {MAX_TICKET_NAME_BYTES} bytes of printable text")]
    BadName,
    /// The session string is not one this server issued.
    #[error("session is not valid on this server")]
    BadSession,
    /// The session is older than `auth.session_ttl_secs`: matchmake without it (or with a
    /// fresh signed identity) to be given a new one.
    #[error("session expired at {expired}, now {now}; matchmake without it for a new one")]
    SessionExpired {
        /// When it expired, unix seconds.
        expired: u64,
        /// The time now.
        now: u64,
    },
    /// The server only accepts backend-signed identities.
    #[error("this server requires a signed identity")]
    IdentityRequired,
    /// The signature does not match.
    #[error("identity signature does not verify")]
    BadSignature,
    /// The signed identity has expired.
    #[error("identity expired at {expires}, now {now}")]
    Expired {
        /// Its expiry.
        expires: u64,
        /// The time now.
        now: u64,
    },
    /// The id is 0 or past 2^53 − 1.
    #[error("player id {0} is outside 1..=2^53-1")]
    IdOutOfRange(u64),
}

/// Checks identities and issues sessions for one server process.
pub(crate) struct Identities {
    mode: AuthMode,
    shared_secret: hmac::Key,
    /// Sessions are signed with a key made at start (or a cluster's): none outlives the
    /// process, or the cluster, that issued it.
    session_key: hmac::Key,
    /// Seconds a session is good for after its first issue; coming back with it does not
    /// extend it, so a session that leaked is good for this long at most.
    session_ttl_secs: u64,
}

impl Identities {
    /// Checks identities under `config`; sessions are signed with `session_secret` when
    /// given (a cluster's, shared by its nodes), else with a key made now.
    pub(crate) fn new(config: &AuthConfig, session_secret: Option<[u8; 32]>) -> Self {
        let session_secret = session_secret.unwrap_or_else(|| {
            let mut secret = [0u8; 32];
            rand::rng().fill(&mut secret);
            secret
        });
        Self {
            mode: config.mode,
            shared_secret: hmac::Key::new(hmac::HMAC_SHA256, config.shared_secret.as_bytes()),
            session_key: hmac::Key::new(hmac::HMAC_SHA256, &session_secret),
            session_ttl_secs: config.session_ttl_secs,
        }
    }

    /// Who is asking, and the session that brings them back: a session wins (and is handed
    /// back as it came, its issue time kept), then a signed identity, then (in guest mode) a
    /// new guest with the name they asked for or a generated one, each with a session
    /// issued now.
    pub(crate) fn resolve(
        &self,
        session: Option<&str>,
        signed: Option<&SignedIdentity>,
        name: Option<&str>,
        unix_now: u64,
    ) -> Result<(Identity, String), IdentityError> {
        if let Some(session) = session {
            let identity = self.open_session(session, unix_now)?;
            return Ok((identity, session.to_string()));
        }
        let identity = self.identify(signed, name, unix_now)?;
        let session = self.session(&identity, unix_now);
        Ok((identity, session))
    }

    /// A signed identity, or a new guest.
    fn identify(
        &self,
        signed: Option<&SignedIdentity>,
        name: Option<&str>,
        unix_now: u64,
    ) -> Result<Identity, IdentityError> {
        if let Some(signed) = signed {
            return self.verify(signed, unix_now);
        }
        if self.mode == AuthMode::SharedSecret {
            return Err(IdentityError::IdentityRequired);
        }
        let mut rng = rand::rng();
        let player = PlayerId(rng.random_range(1..=MAX_PLAYER_ID));
        let name = match name {
            Some(name) => checked_name(name)?,
            None => format!("guest-{:04}", rng.random_range(0..10_000)),
        };
        Ok(Identity { player, name })
    }

    fn verify(&self, signed: &SignedIdentity, unix_now: u64) -> Result<Identity, IdentityError> {
        if self.mode != AuthMode::SharedSecret {
            // A guest server has no secret to check against: never trust the claim.
            return Err(IdentityError::BadSignature);
        }
        let message = format!("{}:{}:{}", signed.id, signed.name, signed.expires);
        let signature = hex::decode(&signed.signature).map_err(|_| IdentityError::BadSignature)?;
        hmac::verify(&self.shared_secret, message.as_bytes(), &signature)
            .map_err(|_| IdentityError::BadSignature)?;
        if signed.expires <= unix_now {
            return Err(IdentityError::Expired {
                expires: signed.expires,
                now: unix_now,
            });
        }
        if signed.id == 0 || signed.id > MAX_PLAYER_ID {
            return Err(IdentityError::IdOutOfRange(signed.id));
        }
        Ok(Identity {
            player: PlayerId(signed.id),
            name: checked_name(&signed.name)?,
        })
    }

    /// A session string for `identity` issued at `issued` (unix seconds): id (u64 LE), issue
    /// time (u64 LE), name length (u8), name, tag.
    fn session(&self, identity: &Identity, issued: u64) -> String {
        let mut body =
            Vec::with_capacity(SESSION_HEAD_BYTES + identity.name.len() + SESSION_TAG_BYTES);
        body.extend_from_slice(&identity.player.0.to_le_bytes());
        body.extend_from_slice(&issued.to_le_bytes());
        body.push(identity.name.len() as u8);
        body.extend_from_slice(identity.name.as_bytes());
        let tag = hmac::sign(&self.session_key, &body);
        body.extend_from_slice(&tag.as_ref()[..SESSION_TAG_BYTES]);
        URL_SAFE_NO_PAD.encode(body)
    }

    fn open_session(&self, session: &str, unix_now: u64) -> Result<Identity, IdentityError> {
        if session.len() > MAX_SESSION_CHARS {
            return Err(IdentityError::BadSession);
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(session)
            .map_err(|_| IdentityError::BadSession)?;
        let split = bytes
            .len()
            .checked_sub(SESSION_TAG_BYTES)
            .ok_or(IdentityError::BadSession)?;
        let (body, tag) = bytes.split_at(split);
        let expected = hmac::sign(&self.session_key, body);
        if !constant_time_eq(&expected.as_ref()[..SESSION_TAG_BYTES], tag)
            || body.len() < SESSION_HEAD_BYTES
        {
            return Err(IdentityError::BadSession);
        }
        let field = |at: usize| {
            body[at..at + 8]
                .try_into()
                .map(u64::from_le_bytes)
                .map_err(|_| IdentityError::BadSession)
        };
        let player = PlayerId(field(0)?);
        let expired = field(8)?.saturating_add(self.session_ttl_secs);
        if expired <= unix_now {
            return Err(IdentityError::SessionExpired {
                expired,
                now: unix_now,
            });
        }
        let name = std::str::from_utf8(&body[SESSION_HEAD_BYTES..])
            .ok()
            .filter(|name| name.len() == usize::from(body[16]))
            .ok_or(IdentityError::BadSession)?;
        Ok(Identity {
            player,
            name: name.to_string(),
        })
    }
}

/// A display name as given, if it is 1 to 32 bytes of printable text after trimming.
fn checked_name(name: &str) -> Result<String, IdentityError> {
    let name = name.trim();
    if name.is_empty() || name.len() > MAX_TICKET_NAME_BYTES || name.chars().any(char::is_control) {
        return Err(IdentityError::BadName);
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed(secret: &str, id: u64, name: &str, expires: u64) -> SignedIdentity {
        let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
        let signature = hmac::sign(&key, format!("{id}:{name}:{expires}").as_bytes());
        SignedIdentity {
            id,
            name: name.into(),
            expires,
            signature: hex::encode(signature.as_ref()),
        }
    }

    fn backend() -> Identities {
        Identities::new(
            &AuthConfig {
                mode: AuthMode::SharedSecret,
                shared_secret: "a secret of some length".into(),
                ..AuthConfig::default()
            },
            None,
        )
    }

    /// Who `resolve` says is asking, without the session it hands back.
    fn who(
        identities: &Identities,
        session: Option<&str>,
        signed: Option<&SignedIdentity>,
        name: Option<&str>,
        unix_now: u64,
    ) -> Result<Identity, IdentityError> {
        identities
            .resolve(session, signed, name, unix_now)
            .map(|(identity, _)| identity)
    }

    #[test]
    fn guests_get_an_id_and_their_session_brings_them_back() {
        let identities = Identities::new(&AuthConfig::default(), None);
        let (guest, session) = identities.resolve(None, None, Some(" Zoë "), 0).unwrap();
        assert_eq!(guest.name, "Zoë");
        assert!((1..=MAX_PLAYER_ID).contains(&guest.player.0));
        assert_eq!(
            who(&identities, Some(&session), None, None, 0),
            Ok(guest.clone())
        );
        let mut forged = URL_SAFE_NO_PAD.decode(&session).unwrap();
        forged[0] ^= 1;
        assert_eq!(
            who(
                &identities,
                Some(&URL_SAFE_NO_PAD.encode(forged)),
                None,
                None,
                0
            ),
            Err(IdentityError::BadSession)
        );
        let other_process = Identities::new(&AuthConfig::default(), None);
        assert_eq!(
            who(&other_process, Some(&session), None, None, 0),
            Err(IdentityError::BadSession)
        );
        assert_eq!(
            who(&identities, Some("!!"), None, None, 0),
            Err(IdentityError::BadSession)
        );
    }

    #[test]
    fn a_clusters_nodes_share_sessions() {
        let node_a = Identities::new(&AuthConfig::default(), Some([7; 32]));
        let node_b = Identities::new(&AuthConfig::default(), Some([7; 32]));
        let (guest, session) = node_a.resolve(None, None, Some("ada"), 0).unwrap();
        assert_eq!(who(&node_b, Some(&session), None, None, 0), Ok(guest));
    }

    #[test]
    fn bad_names_are_refused() {
        let identities = Identities::new(&AuthConfig::default(), None);
        for name in ["", "   ", "a\u{7}b", &"x".repeat(33)] {
            assert_eq!(
                who(&identities, None, None, Some(name), 0),
                Err(IdentityError::BadName),
                "{name:?}"
            );
        }
    }

    #[test]
    fn a_backend_signed_identity_is_checked() {
        let identities = backend();
        let secret = "a secret of some length";
        assert_eq!(
            who(
                &identities,
                None,
                Some(&signed(secret, 42, "ada", 1_000)),
                None,
                999
            ),
            Ok(Identity {
                player: PlayerId(42),
                name: "ada".into()
            })
        );
        assert_eq!(
            who(
                &identities,
                None,
                Some(&signed("another secret!!", 42, "ada", 1_000)),
                None,
                999
            ),
            Err(IdentityError::BadSignature)
        );
        let mut tampered = signed(secret, 42, "ada", 1_000);
        tampered.id = 43;
        assert_eq!(
            who(&identities, None, Some(&tampered), None, 999),
            Err(IdentityError::BadSignature)
        );
        assert_eq!(
            who(
                &identities,
                None,
                Some(&signed(secret, 42, "ada", 1_000)),
                None,
                1_000
            ),
            Err(IdentityError::Expired {
                expires: 1_000,
                now: 1_000
            })
        );
        assert_eq!(
            who(
                &identities,
                None,
                Some(&signed(secret, 1 << 60, "ada", 1_000)),
                None,
                0
            ),
            Err(IdentityError::IdOutOfRange(1 << 60))
        );
        assert_eq!(
            who(&identities, None, None, Some("guest"), 0),
            Err(IdentityError::IdentityRequired),
            "no guests on a backend-signed server"
        );
    }

    #[test]
    fn a_guest_server_never_trusts_a_signed_claim() {
        let identities = Identities::new(&AuthConfig::default(), None);
        assert_eq!(
            who(
                &identities,
                None,
                Some(&signed("", 42, "ada", u64::MAX)),
                None,
                0
            ),
            Err(IdentityError::BadSignature)
        );
    }

    #[test]
    fn a_session_expires_its_lifetime_after_its_first_issue() {
        let identities = Identities::new(
            &AuthConfig {
                session_ttl_secs: 100,
                ..AuthConfig::default()
            },
            None,
        );
        let (guest, session) = identities.resolve(None, None, Some("ada"), 1_000).unwrap();
        // Coming back hands the same session back: its lifetime runs from the first issue.
        let (back, again) = identities
            .resolve(Some(&session), None, None, 1_099)
            .unwrap();
        assert_eq!(
            back, guest,
            "a session within its lifetime is the same player"
        );
        assert_eq!(again, session, "coming back must not extend the session");
        assert_eq!(
            who(&identities, Some(&session), None, None, 1_100),
            Err(IdentityError::SessionExpired {
                expired: 1_100,
                now: 1_100
            }),
            "a session 100 s old must be refused when auth.session_ttl_secs = 100"
        );
        let (_, fresh) = identities.resolve(None, None, Some("ada"), 1_100).unwrap();
        assert!(
            who(&identities, Some(&fresh), None, None, 1_199).is_ok(),
            "a guest matchmaking anew gets a session good for its full lifetime"
        );
    }

    #[test]
    fn the_longest_session_is_accepted_and_a_longer_string_is_not() {
        let identities = Identities::new(&AuthConfig::default(), None);
        let (_, session) = identities
            .resolve(None, None, Some(&"x".repeat(MAX_TICKET_NAME_BYTES)), 0)
            .unwrap();
        assert_eq!(session.len(), MAX_SESSION_CHARS - 1, "no padding: 65 bytes");
        assert!(who(&identities, Some(&session), None, None, 0).is_ok());
        assert_eq!(
            who(
                &identities,
                Some(&"A".repeat(MAX_SESSION_CHARS + 1)),
                None,
                None,
                0
            ),
            Err(IdentityError::BadSession)
        );
    }
}
