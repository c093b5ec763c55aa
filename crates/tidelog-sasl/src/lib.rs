//! tidelog-sasl: the SASL mechanisms tidelog speaks, as Kafka names and runs them.
//!
//! - [`scram`]: SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): the stored
//!   credential (salt, StoredKey, ServerKey, iterations; never the password), the
//!   server's and the client's side of the exchange.
//! - [`plain`]: PLAIN (RFC 4616): the client's one message and its check.
//! - [`jaas`]: Kafka's `sasl.jaas.config` syntax, where PLAIN users and client
//!   credentials are written.
//!
//! - [`oauthbearer`]: OAUTHBEARER (RFC 7628, Kafka's KIP-255): the client's message,
//!   the server's error challenge, and the signed JWT checked against a JWKS.
//! - [`login`]: the mechanism names, and the client's side of a whole exchange.
//!
//! Nothing here does I/O; the broker and the client library carry the tokens.

pub mod jaas;
pub mod login;
pub mod oauthbearer;
pub mod plain;
pub mod scram;

/// Why an exchange failed. The text is for the server's debug log only: a client is
/// told the same thing whatever went wrong, so it learns nothing about a user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    /// The client's message does not follow the mechanism's grammar.
    #[error("malformed SASL message: {0}")]
    Malformed(&'static str),
    /// The user is unknown or the password/proof is wrong.
    #[error("invalid credentials")]
    InvalidCredentials,
    /// Something the mechanism allows but tidelog does not do (channel binding,
    /// delegation tokens, an authorization id other than the user).
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
    /// A message arrived when the exchange expected none.
    #[error("unexpected SASL message in state {0}")]
    UnexpectedMessage(&'static str),
    /// A refusal whose text the mechanism tells the client as it is: OAUTHBEARER's
    /// JSON error status, or Kafka's message for an authorization id that is not the
    /// token's. `why` is for the server's debug log.
    #[error("token refused: {why}")]
    Refused { answer: String, why: String },
    /// The server's answer does not prove it knows the credential (client side).
    #[error("the server's signature does not match: it does not know the credential")]
    BadServerSignature,
}
