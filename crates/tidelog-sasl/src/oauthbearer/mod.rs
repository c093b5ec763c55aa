//! OAUTHBEARER (RFC 7628) as Kafka speaks it (KIP-255): the client's one message
//! `n,[a=<authzid>],\x01auth=Bearer <token>\x01[<key>=<value>\x01...]\x01`, and on a
//! refused token the server's JSON error challenge (`{"status":"invalid_token"}`),
//! which the client acknowledges with a single `\x01` before the exchange fails.
//!
//! The token is a signed JWT checked against a JWKS ([`jwt`], [`jwks`]) with the rules
//! of Kafka's OAuthBearerValidatorCallbackHandler (KIP-768). Nothing here fetches the
//! key set: the broker does, and hands the keys in.

pub mod jwks;
pub mod jwt;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;

use crate::SaslError;

/// The client's acknowledgement of the server's error challenge (RFC 7628 §3.2.3).
pub const ERROR_ACKNOWLEDGEMENT: &[u8] = &[KVSEP];

const KVSEP: u8 = 0x01;

/// The parts of a client's first message the server uses. Extensions (key=value
/// pairs other than `auth`) are read and accepted, as Kafka's validator accepts them.
#[derive(Debug, PartialEq, Eq)]
pub struct ClientFirst<'a> {
    /// Empty, or the principal the client asks to act as (must be the token's).
    pub authzid: &'a str,
    /// The bearer token (a JWT).
    pub token: &'a str,
}

/// Parses a client's first message.
pub fn parse_client_first(message: &[u8]) -> Result<ClientFirst<'_>, SaslError> {
    let text = std::str::from_utf8(message).map_err(|_| SaslError::Malformed("not UTF-8"))?;
    // Channel binding is not supported: the GS2 flag must be `n`.
    let rest = text
        .strip_prefix("n,")
        .ok_or(SaslError::Malformed("the GS2 header must start with n,"))?;
    let (authzid, rest) = match rest.strip_prefix("a=") {
        Some(named) => named
            .split_once(',')
            .ok_or(SaslError::Malformed("unterminated authorization id"))?,
        None => (
            "",
            rest.strip_prefix(',')
                .ok_or(SaslError::Malformed("malformed GS2 header"))?,
        ),
    };
    if !authzid
        .bytes()
        .all(|b| (0x01..=0x7f).contains(&b) && b != b',')
    {
        return Err(SaslError::Malformed("malformed authorization id"));
    }
    let sep = char::from(KVSEP);
    // `\x01 *(key=value \x01) \x01`: strip the first separator and the closing one;
    // what remains is pairs, each ended by a separator.
    let pairs = rest
        .strip_prefix(sep)
        .and_then(|r| r.strip_suffix(sep))
        .ok_or(SaslError::Malformed(
            "the key/value pairs are not framed by 0x01",
        ))?;
    let pairs = pairs
        .strip_suffix(sep)
        .ok_or(SaslError::Malformed("no auth key/value pair"))?;
    let mut auth = None;
    let mut keys: Vec<&str> = Vec::new();
    for pair in pairs.split(sep) {
        let (key, value) = pair
            .split_once('=')
            .ok_or(SaslError::Malformed("a key/value pair without ="))?;
        let key_ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic());
        let value_ok = !value.is_empty()
            && value
                .bytes()
                .all(|b| (0x21..=0x7e).contains(&b) || matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
        if !key_ok || !value_ok {
            return Err(SaslError::Malformed("malformed key/value pair"));
        }
        if keys.contains(&key) {
            return Err(SaslError::Malformed("a key given twice"));
        }
        if keys.len() >= MAX_PAIRS {
            return Err(SaslError::Malformed("too many key/value pairs"));
        }
        keys.push(key);
        if key == "auth" {
            auth = Some(value);
        }
    }
    let auth = auth.ok_or(SaslError::Malformed("no auth key/value pair"))?;
    Ok(ClientFirst {
        authzid,
        token: bearer_token(auth)?,
    })
}

/// Extensions a client may send besides `auth`: Kafka's clients send a handful.
const MAX_PAIRS: usize = 64;

/// `Bearer <token>`: the scheme case-insensitively, one or more spaces, and a token
/// of the characters a JWT is made of (as Kafka's parser accepts).
fn bearer_token(auth: &str) -> Result<&str, SaslError> {
    let (scheme, token) = auth
        .split_once(' ')
        .ok_or(SaslError::Malformed("auth is not `Bearer <token>`"))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(SaslError::Malformed("the auth scheme is not Bearer"));
    }
    let token = token.trim_start_matches(' ');
    let token_ok = !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !token_ok {
        return Err(SaslError::Malformed(
            "the bearer token has characters a JWT has not",
        ));
    }
    Ok(token)
}

/// A client's first message carrying `token` (no authorization id, no extensions).
pub fn client_first(token: &str) -> Vec<u8> {
    format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes()
}

/// The server's challenge for a refused token: RFC 7628's JSON error with the status
/// Kafka's validator gives every refusal.
pub fn invalid_token_challenge() -> Vec<u8> {
    br#"{"status":"invalid_token"}"#.to_vec()
}

#[cfg(test)]
mod tests;
