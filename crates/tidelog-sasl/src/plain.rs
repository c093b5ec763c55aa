//! PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd` in one client message.
//! The authorization id must be empty or the user itself, as in Kafka: a user
//! cannot ask to act as another.

use subtle::ConstantTimeEq;

use crate::SaslError;

/// The longest PLAIN field read (RFC 4616 allows 255 UTF-8 characters each).
const MAX_FIELD_BYTES: usize = 1020;

/// Splits a client message into `(user, password)`.
pub fn parse(message: &[u8]) -> Result<(&str, &str), SaslError> {
    let text = std::str::from_utf8(message).map_err(|_| SaslError::Malformed("not UTF-8"))?;
    let mut fields = text.split('\0');
    let (Some(authzid), Some(user), Some(password), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(SaslError::Malformed(
            "PLAIN is three fields separated by NUL",
        ));
    };
    if user.is_empty() || password.is_empty() {
        return Err(SaslError::Malformed("empty user or password"));
    }
    if [authzid, user, password]
        .iter()
        .any(|f| f.len() > MAX_FIELD_BYTES)
    {
        return Err(SaslError::Malformed("field too long"));
    }
    if !authzid.is_empty() && authzid != user {
        return Err(SaslError::Unsupported(
            "an authorization id different from the user",
        ));
    }
    Ok((user, password))
}

/// Checks a client message against the users' passwords; the user on success.
/// `password_of` answers the configured password of a user.
pub fn authenticate(
    message: &[u8],
    password_of: impl Fn(&str) -> Option<String>,
) -> Result<&str, SaslError> {
    let (user, given) = parse(message)?;
    let Some(expected) = password_of(user) else {
        return Err(SaslError::InvalidCredentials);
    };
    if bool::from(expected.as_bytes().ct_eq(given.as_bytes())) {
        Ok(user)
    } else {
        Err(SaslError::InvalidCredentials)
    }
}

/// The client's message for `user` and `password` (empty authorization id).
pub fn client_message(user: &str, password: &str) -> Vec<u8> {
    format!("\0{user}\0{password}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(user: &str) -> Option<String> {
        (user == "alice").then(|| "alice-secret".to_string())
    }

    #[test]
    fn plain_messages() {
        assert_eq!(authenticate(b"\0alice\0alice-secret", users), Ok("alice"));
        assert_eq!(
            authenticate(b"alice\0alice\0alice-secret", users),
            Ok("alice")
        );
        assert_eq!(
            authenticate(b"\0alice\0wrong", users),
            Err(SaslError::InvalidCredentials)
        );
        assert_eq!(
            authenticate(b"\0bob\0alice-secret", users),
            Err(SaslError::InvalidCredentials)
        );
        assert!(matches!(
            authenticate(b"bob\0alice\0alice-secret", users),
            Err(SaslError::Unsupported(_))
        ));
        for bad in [&b"alice"[..], b"\0alice", b"\0\0x", b"\0a\0b\0c", b"\0a\0"] {
            assert!(
                matches!(parse(bad), Err(SaslError::Malformed(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            authenticate(&client_message("alice", "alice-secret"), users),
            Ok("alice")
        );
    }
}
