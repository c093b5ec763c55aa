//! The SASL exchange of a SASL_PLAINTEXT or SASL_SSL connection, before its first
//! other request and again at each KIP-368 re-authentication, as Kafka's
//! SaslServerAuthenticator runs it:
//!
//! - before the handshake, one ApiVersions may come; anything other than ApiVersions
//!   or SaslHandshake closes the connection;
//! - SaslHandshake v0 is followed by the mechanism's raw tokens (size-prefixed, no
//!   Kafka header); v1 by SaslAuthenticate requests, and nothing else;
//! - every frame read before authentication completes is at most
//!   `sasl.server.max.receive.size`;
//! - a failure waits `connection.failed.authentication.delay.ms`, then sends its
//!   answer (if it has one) and closes. A client is told only "invalid credentials";
//!   why is logged at debug level, never a credential.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::sasl_handshake_request::SaslHandshakeRequest;
use kafka_protocol::messages::sasl_handshake_response::SaslHandshakeResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tidelog_protocol::header::{decode_request_header, encode_response};
use tidelog_protocol::{DecodedHeader, ProtocolError};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, watch};

use super::connection::{Reply, Session};
use crate::apis;
use crate::context::Ctx;
use crate::sasl::{Authenticated, MechanismServer, SaslListener, SaslMechanism};

/// An authenticated SASL session.
#[derive(Debug, Clone)]
pub(super) struct SaslSession {
    pub(super) mechanism: SaslMechanism,
    /// `User:<name>`.
    pub(super) principal: String,
    /// When the session ends (`connections.max.reauth.ms` after authentication, or
    /// the token's expiry if sooner); `None`: never.
    pub(super) expires: Option<Instant>,
    /// The client authenticated with SaslAuthenticate v1 or later, so it knows to
    /// re-authenticate (a SaslHandshake on the authenticated connection starts that).
    pub(super) can_reauthenticate: bool,
}

impl SaslSession {
    pub(super) fn expired(&self, now: Instant) -> bool {
        self.expires.is_some_and(|at| now >= at)
    }
}

/// Where the exchange runs: the connection's listener, its replies queue and who
/// is on the other end.
pub(super) struct Exchange<'a> {
    pub(super) ctx: &'a Ctx,
    pub(super) listener: &'a SaslListener,
    pub(super) listener_name: &'a Arc<str>,
    pub(super) peer: SocketAddr,
    pub(super) tx: &'a mpsc::Sender<Reply>,
}

mod tokens;

enum State {
    /// Nothing yet: ApiVersions or SaslHandshake.
    Initial,
    /// After ApiVersions (or at re-authentication): SaslHandshake only.
    Handshake,
    /// Tokens of the chosen mechanism; `raw` after a v0 handshake.
    Authenticate {
        mechanism: SaslMechanism,
        server: MechanismServer,
        raw: bool,
    },
    /// A re-authentication asked for another mechanism than the session's: the
    /// handshake is answered, the next frame fails (as Kafka does).
    BadReauthMechanism(SaslMechanism),
}

/// Why the exchange ended without a session: closed quietly (the client went, or
/// shutdown), or failed (counted, delayed, answered where there is an answer).
pub(super) enum Outcome {
    Gone,
    Failed {
        mechanism: Option<SaslMechanism>,
        answer: Option<Bytes>,
        why: String,
    },
}

impl Exchange<'_> {
    /// Runs one exchange; `reauth` carries the session being renewed and the
    /// SaslHandshake frame that started it. `None`: close the connection (replies
    /// already queued are written first).
    pub(super) async fn run(
        &self,
        reader: &mut (impl AsyncRead + Unpin),
        reauth: Option<(&SaslSession, Bytes)>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Option<SaslSession> {
        let previous = reauth.as_ref().map(|(s, _)| (*s).clone());
        let first = reauth.map(|(_, frame)| frame);
        let outcome = self
            .exchange(reader, previous.as_ref(), first, shutdown)
            .await;
        let (mechanism, answer, why) = match outcome {
            Ok(session) => {
                self.count(Some(session.mechanism), "success");
                return Some(session);
            }
            Err(Outcome::Gone) => return None,
            Err(Outcome::Failed {
                mechanism,
                answer,
                why,
            }) => (mechanism, answer, why),
        };
        self.count(mechanism, "failure");
        let listener = &**self.listener_name;
        let peer = self.peer;
        tracing::info!(%peer, listener, mechanism = mechanism.map_or("none", SaslMechanism::name), "SASL authentication failed; closing the connection");
        tracing::debug!(%peer, listener, "SASL authentication failure: {why}");
        tokio::select! {
            _ = tokio::time::sleep(self.listener.failure_delay) => {}
            _ = shutdown.changed() => return None,
        }
        if let Some(answer) = answer {
            let _ = self.tx.send(Reply::Bytes(answer)).await;
        }
        let _ = self.tx.send(Reply::Close).await;
        None
    }

    fn count(&self, mechanism: Option<SaslMechanism>, result: &'static str) {
        let mechanism = mechanism.map_or("none", SaslMechanism::name);
        self.ctx
            .metrics
            .requests
            .authentication(self.listener_name, mechanism, result);
    }

    pub(super) async fn send(&self, reply: Bytes) -> Result<(), Outcome> {
        self.tx
            .send(Reply::Bytes(reply))
            .await
            .map_err(|_| Outcome::Gone)
    }

    async fn exchange(
        &self,
        reader: &mut (impl AsyncRead + Unpin),
        previous: Option<&SaslSession>,
        mut first: Option<Bytes>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<SaslSession, Outcome> {
        let mut state = if previous.is_some() {
            State::Handshake
        } else {
            State::Initial
        };
        loop {
            let frame = match first.take() {
                Some(frame) => frame,
                None => self.read_frame(reader, shutdown).await?,
            };
            state = match state {
                State::Initial | State::Handshake => {
                    self.handshake_frame(frame, matches!(state, State::Initial), previous)
                        .await?
                }
                State::BadReauthMechanism(mechanism) => {
                    return Err(failed(
                        Some(mechanism),
                        None,
                        "re-authentication with another mechanism than the session's",
                    ))
                }
                State::Authenticate {
                    mechanism,
                    mut server,
                    raw,
                } => {
                    let done = if raw {
                        self.raw_token(&frame, mechanism, &mut server).await?
                    } else {
                        self.authenticate_request(frame, mechanism, &mut server, previous)
                            .await?
                    };
                    match done {
                        Some(session) => return Ok(session),
                        None => State::Authenticate {
                            mechanism,
                            server,
                            raw,
                        },
                    }
                }
            };
        }
    }

    /// Reads one frame, at most `sasl.server.max.receive.size` bytes.
    async fn read_frame(
        &self,
        reader: &mut (impl AsyncRead + Unpin),
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<Bytes, Outcome> {
        let read = async {
            let size = reader.read_i32().await.map_err(|_| Outcome::Gone)?;
            let len =
                usize::try_from(size).map_err(|_| failed(None, None, "negative frame size"))?;
            if len > self.listener.max_receive_bytes {
                return Err(failed(
                    None,
                    None,
                    "frame larger than sasl.server.max.receive.size before authentication",
                ));
            }
            let mut body = BytesMut::zeroed(len);
            reader
                .read_exact(&mut body)
                .await
                .map_err(|_| Outcome::Gone)?;
            Ok(body.freeze())
        };
        tokio::select! {
            frame = read => frame,
            _ = shutdown.changed() => Err(Outcome::Gone),
        }
    }

    /// ApiVersions (first frame only, not at re-authentication) or SaslHandshake.
    async fn handshake_frame(
        &self,
        frame: Bytes,
        initial: bool,
        previous: Option<&SaslSession>,
    ) -> Result<State, Outcome> {
        let mut body = frame;
        let first = initial && previous.is_none();
        let header = match decode_request_header(&mut body) {
            Ok(header) => header,
            // A newer client's ApiVersions whose header we cannot read: answered with
            // our ranges, and it may ask again (as Kafka answers an unsupported one).
            Err(ProtocolError::MalformedHeader {
                api_key: ApiKey::ApiVersions,
                correlation_id,
                ..
            }) if first => {
                return match apis::api_versions::unsupported_version(correlation_id) {
                    Reply::Bytes(bytes) => {
                        self.send(bytes).await?;
                        Ok(State::Initial)
                    }
                    _ => Err(failed(None, None, "unanswerable ApiVersions")),
                };
            }
            Err(_) => {
                return Err(failed(
                    None,
                    None,
                    "not a Kafka request before the SASL handshake",
                ))
            }
        };
        match header.api_key {
            ApiKey::ApiVersions if first => {
                // Only an ApiVersions at a version we speak moves on; one we do not
                // is answered UNSUPPORTED_VERSION and the client may retry lower.
                let supported = apis::accepts(ApiKey::ApiVersions as i16, header.api_version);
                let session = Arc::new(Session::new(
                    Arc::clone(self.listener_name),
                    "User:ANONYMOUS".to_string(),
                ));
                let reply = apis::handle(self.ctx, header, body, self.peer, &session).await;
                match reply {
                    Reply::Bytes(bytes) => self.send(bytes).await?,
                    _ => return Err(failed(None, None, "undecodable ApiVersions")),
                }
                Ok(if supported {
                    State::Handshake
                } else {
                    State::Initial
                })
            }
            ApiKey::SaslHandshake => self.handshake(&header, body, previous).await,
            other => Err(failed(
                None,
                None,
                &format!("unexpected Kafka request of type {other:?} during SASL handshake"),
            )),
        }
    }

    async fn handshake(
        &self,
        header: &DecodedHeader,
        mut body: Bytes,
        previous: Option<&SaslSession>,
    ) -> Result<State, Outcome> {
        let version = header.api_version;
        if !(0..=1).contains(&version) {
            return Err(failed(None, None, "unsupported SaslHandshake version"));
        }
        let request = SaslHandshakeRequest::decode(&mut body, version)
            .map_err(|_| failed(None, None, "undecodable SaslHandshake"))?;
        let enabled = self
            .listener
            .mechanisms
            .iter()
            .map(|m| StrBytes::from_static_str(m.name()))
            .collect();
        let response = SaslHandshakeResponse::default().with_mechanisms(enabled);
        let Some(mechanism) = self.listener.enabled(&request.mechanism) else {
            let response = response.with_error_code(ResponseError::UnsupportedSaslMechanism.code());
            let answer = encode(header, &response);
            return Err(failed(
                None,
                answer,
                &format!(
                    "unsupported SASL mechanism {:?}",
                    request.mechanism.as_str()
                ),
            ));
        };
        self.send(encode(header, &response).ok_or(Outcome::Gone)?)
            .await?;
        if previous.is_some_and(|p| p.mechanism != mechanism) {
            return Ok(State::BadReauthMechanism(mechanism));
        }
        Ok(State::Authenticate {
            mechanism,
            server: MechanismServer::new(mechanism),
            raw: version == 0,
        })
    }

    /// The session of a client authenticated now, and its lifetime in milliseconds as
    /// SaslAuthenticate tells it (0: none). As Kafka's ReauthInfo computes it: the
    /// listener's `connections.max.reauth.ms`, cut to the credential's own end when
    /// it has one (an OAUTHBEARER token's `exp`), which holds even when the setting
    /// is 0.
    pub(super) fn session(
        &self,
        mechanism: SaslMechanism,
        done: &Authenticated,
        can_reauthenticate: bool,
    ) -> (SaslSession, i64) {
        let max_ms = i64::try_from(self.listener.max_reauth.as_millis()).unwrap_or(i64::MAX);
        let credential_ms = done
            .credential_expires_at_ms
            .map(|at| at.saturating_sub(crate::sasl::unix_millis()).max(0));
        let lifetime_ms = match (credential_ms, max_ms > 0) {
            (None, false) => None,
            (None, true) => Some(max_ms),
            (Some(left), false) => Some(left),
            (Some(left), true) => Some(left.min(max_ms)),
        };
        let expires = lifetime_ms
            .map(|ms| Instant::now() + Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
        let session = SaslSession {
            mechanism,
            principal: format!("User:{}", done.user),
            expires,
            can_reauthenticate,
        };
        (session, lifetime_ms.unwrap_or(0))
    }
}

pub(super) fn failed(
    mechanism: Option<SaslMechanism>,
    answer: Option<Bytes>,
    why: &str,
) -> Outcome {
    Outcome::Failed {
        mechanism,
        answer,
        why: why.to_string(),
    }
}

pub(super) fn encode<T: Encodable>(header: &DecodedHeader, body: &T) -> Option<Bytes> {
    encode_response(
        header.correlation_id,
        header.api_key,
        header.api_version,
        body,
    )
    .ok()
}
