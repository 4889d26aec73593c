//! The JSON of the HTTP matchmaking API (`POST /api/matchmake`), one definition for the
//! server that answers it and the clients that ask: what a player asks for, what the server
//! answers, and the identity a game's backend signs. The fields and their meaning are
//! specified in `docs/PROTOCOL.md`, "Matchmaking".

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// An identity signed by the game's own backend (`auth.mode = "shared_secret"`): HMAC-SHA256
/// of `"{id}:{name}:{expires}"` under the shared secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedIdentity {
    /// The player's id, 1 to 2^53 − 1.
    pub id: u64,
    /// Display name.
    pub name: String,
    /// Unix seconds after which the server refuses it.
    pub expires: u64,
    /// Lowercase hex HMAC-SHA256 of `"{id}:{name}:{expires}"`.
    pub signature: String,
}

/// What a player asks for: a room kind to join or create, or one room by id. Fields left
/// unset are left out of the JSON; the server refuses fields it does not know.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchmakeRequest {
    /// Join-or-create a room of this kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Or join this room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<u64>,
    /// With `kind`: always create a new room of that kind.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub create: bool,
    /// A guest's display name (the server generates one when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The session from an earlier answer: the same player again, and their seat if held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// A backend-signed identity instead of a guest one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<SignedIdentity>,
    /// Options for a room this request creates (string keys and values, bounded: 16
    /// entries, keys of `a-z0-9_-` up to 32 bytes, values up to 128); the room's `create`
    /// checks their meaning. Ignored when the request joins a room that exists.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
    /// With `kind` (join-or-create): only rooms whose label matches, e.g.
    /// `label.mode = "ranked"` (clauses joined by `and`, `=` or `!=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
}

impl MatchmakeRequest {
    /// Join or create a room of `kind`.
    pub fn kind(kind: impl Into<String>) -> Self {
        Self {
            kind: Some(kind.into()),
            ..Self::default()
        }
    }

    /// A new room of `kind`, whatever rooms are open.
    pub fn create(kind: impl Into<String>) -> Self {
        Self {
            kind: Some(kind.into()),
            create: true,
            ..Self::default()
        }
    }

    /// Room `room`, by id.
    pub fn room(room: u64) -> Self {
        Self {
            room: Some(room),
            ..Self::default()
        }
    }

    /// With a display name.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// Where the server can be reached, per transport.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoints {
    /// The room's shard, for the UDP protocol.
    pub udp: SocketAddr,
    /// `ws://host:port/ws`.
    pub ws: String,
    /// `wss://host:port/ws`, when the server runs TLS; `null` otherwise.
    #[serde(default)]
    pub wss: Option<String>,
    /// WebTransport, when the server serves it; `null` otherwise.
    #[serde(default)]
    pub wt: Option<WtEndpointInfo>,
}

/// Where the server's WebTransport endpoint is and how to trust it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WtEndpointInfo {
    /// `https://host:port/wt`.
    pub url: String,
    /// Lowercase hex SHA-256 of the self-signed certificate's DER (a browser's
    /// `serverCertificateHashes`); `null` with a certificate the system's roots validate.
    pub cert_sha256: Option<String>,
}

/// The server's answer: who the player is, where they sit, and the token that lets them in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchmakeAnswer {
    /// The player's id on this server.
    pub player_id: u64,
    /// Display name.
    pub name: String,
    /// The room.
    pub room: u64,
    /// The room's kind.
    pub kind: String,
    /// True when this is the player's held seat coming back.
    pub reconnect: bool,
    /// Give this back in the next request to be the same player (and get the seat back).
    pub session: String,
    /// The 2048-byte connect token, standard base64: the first WebSocket or WebTransport
    /// frame, or the UDP client's token ([`ConnectToken`](crate::token::ConnectToken)).
    pub token: String,
    /// Unix seconds after which the token is refused.
    pub expires_at: u64,
    /// Where to connect.
    pub endpoints: Endpoints,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_names_only_what_is_set_and_reads_back() {
        let request = MatchmakeRequest::kind("relay").named("ann");
        let json = serde_json::to_string(&request).unwrap();
        assert_eq!(json, r#"{"kind":"relay","name":"ann"}"#);
        assert_eq!(
            serde_json::from_str::<MatchmakeRequest>(&json).unwrap(),
            request
        );
    }

    #[test]
    fn a_request_with_an_unknown_field_is_refused() {
        let error =
            serde_json::from_str::<MatchmakeRequest>(r#"{"kind":"relay","colour":1}"#).unwrap_err();
        assert!(error.to_string().contains("colour"), "{error}");
    }

    #[test]
    fn an_answer_without_tls_or_webtransport_reads_as_none() {
        let body = r#"{"player_id":1,"name":"a","room":1,"kind":"relay","reconnect":false,
            "session":"s","token":"AAAA","expires_at":0,
            "endpoints":{"udp":"127.0.0.1:7777","ws":"ws://x/ws","wss":null}}"#;
        let answer: MatchmakeAnswer = serde_json::from_str(body).unwrap();
        assert_eq!(answer.endpoints.udp, "127.0.0.1:7777".parse().unwrap());
        assert_eq!((answer.endpoints.wss, answer.endpoints.wt), (None, None));
    }
}
