//! The WebTransport side of a [`Link`](crate::Link): `tickwire_net::wt::WtClient` (the login,
//! the token and its proof answering the server's challenge, in the first frame of the
//! control stream; Reliable channels as frames, unreliable ones
//! as datagrams; docs/PROTOCOL.md, "WebTransport transport").

use std::time::Duration;

use tickwire_net::ws::CloseCode;
use tickwire_net::wt::{WtClient, WtClientError};
use tickwire_proto::ConnectionParams;

use crate::link::{ConnectError, Ended, LinkEvent, SendError};
use crate::matchmake::{MatchAnswer, WtEndpointInfo};

/// A connected WebTransport link.
pub(crate) struct WtLink {
    client: WtClient,
}

/// How a session's end reads as a link's.
fn ended(error: WtClientError) -> Ended {
    match error {
        WtClientError::Closed { code, reason } => Ended::from_close(code, &reason),
        other => Ended::Lost(other.to_string()),
    }
}

impl WtLink {
    pub(crate) async fn connect(
        endpoint: &WtEndpointInfo,
        answer: &MatchAnswer,
    ) -> Result<(Self, ConnectionParams), ConnectError> {
        let token = answer
            .token
            .to_bytes()
            .map_err(|error| ConnectError::Protocol(format!("token: {error}")))?;
        let client = WtClient::connect(&endpoint.url, endpoint.cert_sha256.as_deref(), &token[..])
            .await
            .map_err(|error| match error {
                WtClientError::Closed { code, reason } => {
                    ConnectError::Refused(Ended::from_close(code, &reason))
                }
                WtClientError::Connect(why) => ConnectError::Io(std::io::Error::other(why)),
                other => ConnectError::Protocol(other.to_string()),
            })?;
        let params = client.params().clone();
        Ok((Self { client }, params))
    }

    pub(crate) fn send(&mut self, channel: u8, message: &[u8]) -> Result<(), SendError> {
        self.client
            .queue(channel, message)
            .map_err(|error| match error {
                WtClientError::Lost => SendError::Ended,
                other => SendError::Refused(other.to_string()),
            })
    }

    pub(crate) async fn flush(&mut self) -> Result<(), Ended> {
        self.client.flush().await.map_err(ended)
    }

    pub(crate) fn rtt(&self) -> Duration {
        self.client.rtt()
    }

    pub(crate) async fn next_event(&mut self) -> LinkEvent {
        if let Err(ended) = self.flush().await {
            return LinkEvent::Ended(ended);
        }
        match self.client.recv().await {
            Ok((channel, message)) => LinkEvent::Message { channel, message },
            Err(error) => LinkEvent::Ended(ended(error)),
        }
    }

    pub(crate) async fn close(&mut self) {
        let _ = self.flush().await;
        self.client
            .close(CloseCode::Requested, CloseCode::Requested.default_reason())
            .await;
    }
}
