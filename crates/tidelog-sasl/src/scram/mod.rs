//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), with Kafka's names, limits
//! and its one extension, `tokenauth` (delegation tokens), which tidelog refuses.
//!
//! A credential is stored as Kafka stores it: salt, StoredKey = H(HMAC(salted,
//! "Client Key")), ServerKey = HMAC(salted, "Server Key") and the iteration count.
//! The password and the salted password are never kept: an admin client sends the
//! salted password (`AlterUserScramCredentials`), the controller keeps the two keys.

mod client;
mod server;
#[cfg(test)]
mod tests;

pub use client::ScramClient;
pub use server::{ScramServer, ServerStep};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ring::{digest, hmac, pbkdf2};

use crate::SaslError;

/// The two SCRAM mechanisms, with Kafka's names and type ids
/// (`org.apache.kafka.clients.admin.ScramMechanism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name, e.g. `SCRAM-SHA-512`.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// Kafka's mechanism type on the wire (0 is UNKNOWN).
    pub fn type_id(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_type_id(id: i8) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.type_id() == id)
    }

    /// By SASL name, case-insensitively.
    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name.trim()))
    }

    /// Kafka's bounds on the iteration count (ScramMechanism.minIterations and the
    /// 16384 maximum AlterUserScramCredentials enforces).
    pub const MIN_ITERATIONS: u32 = 4096;
    pub const MAX_ITERATIONS: u32 = 16384;

    fn hmac(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }

    /// Output length of the hash, in bytes.
    pub fn hash_len(self) -> usize {
        self.digest().output_len()
    }

    /// Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.hash_len()];
        let rounds =
            std::num::NonZeroU32::new(iterations.max(1)).unwrap_or(std::num::NonZeroU32::MIN);
        pbkdf2::derive(self.pbkdf2(), rounds, salt, password, &mut out);
        out
    }

    fn mac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(self.hmac(), key), data)
            .as_ref()
            .to_vec()
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest(), data).as_ref().to_vec()
    }
}

impl std::fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a server keeps of a user's password for one mechanism.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

impl std::fmt::Debug for ScramCredential {
    // Keys are not secrets in the password sense, but they let a client impersonate
    // the server; they stay out of every log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// The keys of a salted password (what the controller computes from an
    /// AlterUserScramCredentials upsertion).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted: &[u8],
        salt: Vec<u8>,
        iterations: u32,
    ) -> ScramCredential {
        let client_key = mechanism.mac(salted, b"Client Key");
        ScramCredential {
            salt,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.mac(salted, b"Server Key"),
            iterations,
        }
    }

    /// Whether `password` is the one this credential was made from: its StoredKey
    /// derived again with the stored salt and iterations, compared in constant time
    /// (a password given whole, as HTTP Basic gives it to the admin port; a SCRAM
    /// exchange never sends it). Costs the PBKDF2 rounds: call it off async workers.
    pub fn verifies(&self, mechanism: ScramMechanism, password: &str) -> bool {
        use subtle::ConstantTimeEq;
        let salted = mechanism.salted_password(password.as_bytes(), &self.salt, self.iterations);
        let stored_key = mechanism.hash(&mechanism.mac(&salted, b"Client Key"));
        bool::from(stored_key.ct_eq(&self.stored_key))
    }

    /// The credential for a password (tests, and creating a user from a data dir).
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: Vec<u8>,
        iterations: u32,
    ) -> ScramCredential {
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        ScramCredential::from_salted_password(mechanism, &salted, salt, iterations)
    }
}

/// Salt length of the credentials tidelog's tools create (as many bytes as the longest
/// hash's output would be overkill; Kafka's admin client uses about 20).
pub const SALT_BYTES: usize = 32;

/// Random bytes from the operating system (salts and nonces).
pub fn random_bytes(len: usize) -> Vec<u8> {
    use ring::rand::SecureRandom;
    let mut out = vec![0u8; len];
    // The system source does not fail on Linux once booted; if it ever did, a zeroed
    // buffer would be predictable, so fall back to mixing the clock in rather than
    // panicking on a path a client reaches.
    if ring::rand::SystemRandom::new().fill(&mut out).is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let seed = digest::digest(&digest::SHA256, &now.to_le_bytes());
        for (i, b) in out.iter_mut().enumerate() {
            *b = seed.as_ref()[i % seed.as_ref().len()];
        }
    }
    out
}

/// A fresh nonce: printable, without `,` (RFC 5802 `printable`), base64 of 24
/// random bytes.
pub(crate) fn fresh_nonce() -> String {
    B64.encode(random_bytes(24))
}

pub(crate) fn b64(data: &[u8]) -> String {
    B64.encode(data)
}

pub(crate) fn unb64(text: &str) -> Result<Vec<u8>, SaslError> {
    B64.decode(text)
        .map_err(|_| SaslError::Malformed("bad base64"))
}

/// `a XOR b` of equal lengths.
pub(crate) fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// A `saslname` (RFC 5802: `,` and `=` escaped as `=2C` and `=3D`) decoded.
pub(crate) fn decode_saslname(text: &str) -> Result<String, SaslError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3);
        match code {
            Some("2C") => out.push(','),
            Some("3D") => out.push('='),
            _ => return Err(SaslError::Malformed("bad escape in a user name")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

pub(crate) fn encode_saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// The `key=value` attributes of a SCRAM message, in order.
pub(crate) fn attributes(message: &str) -> Result<Vec<(char, &str)>, SaslError> {
    message
        .split(',')
        .map(|part| {
            let mut chars = part.chars();
            match (chars.next(), chars.next()) {
                (Some(key), Some('=')) if key.is_ascii_alphabetic() => Ok((key, &part[2..])),
                _ => Err(SaslError::Malformed("expected key=value attributes")),
            }
        })
        .collect()
}
