//! A JSON Web Key Set (RFC 7517) of signature verification keys: RSA keys and EC keys
//! on P-256 and P-384. Keys of other types, or marked for encryption (`"use":"enc"`),
//! are skipped, as a JWKS consumer skips what it cannot use.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::Value;

/// The most keys read from one set: identity providers publish a few.
const MAX_KEYS: usize = 1000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    #[error("the key set is not JSON")]
    NotJson,
    #[error("the key set has no \"keys\" array")]
    NoKeys,
    #[error("the key set has more than {MAX_KEYS} keys")]
    TooManyKeys,
}

/// An EC curve, by its JWK name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Curve {
    P256,
    P384,
}

/// A public key as a verifier needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    /// Modulus and exponent, big-endian.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// The uncompressed point `0x04 || x || y`.
    Ec { curve: Curve, point: Vec<u8> },
}

/// One usable key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    pub kid: Option<String>,
    /// The one algorithm the key is for, when the set says.
    pub alg: Option<String>,
    pub key: PublicKey,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Jwks {
    keys: Vec<Jwk>,
    /// Keys in the set that are not usable for signatures here.
    skipped: usize,
}

impl Jwks {
    /// Reads a key set (`{"keys":[...]}`).
    pub fn parse(json: &[u8]) -> Result<Jwks, JwksError> {
        let value: Value = serde_json::from_slice(json).map_err(|_| JwksError::NotJson)?;
        let entries = value
            .get("keys")
            .and_then(Value::as_array)
            .ok_or(JwksError::NoKeys)?;
        if entries.len() > MAX_KEYS {
            return Err(JwksError::TooManyKeys);
        }
        let mut set = Jwks::default();
        for entry in entries {
            match usable_key(entry) {
                Some(key) => set.keys.push(key),
                None => set.skipped += 1,
            }
        }
        Ok(set)
    }

    pub fn keys(&self) -> &[Jwk] {
        &self.keys
    }

    /// How many keys of the set were left out (not signature keys tidelog verifies).
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    pub fn has_kid(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.kid.as_deref() == Some(kid))
    }
}

fn usable_key(entry: &Value) -> Option<Jwk> {
    let text = |name: &str| entry.get(name).and_then(Value::as_str);
    let bytes = |name: &str| text(name).and_then(|v| URL_SAFE_NO_PAD.decode(v).ok());
    if text("use").is_some_and(|u| u != "sig") {
        return None;
    }
    let key = match text("kty")? {
        "RSA" => {
            let n = strip_leading_zeros(bytes("n")?);
            let e = strip_leading_zeros(bytes("e")?);
            if n.is_empty() || e.is_empty() {
                return None;
            }
            PublicKey::Rsa { n, e }
        }
        "EC" => {
            let (curve, len) = match text("crv")? {
                "P-256" => (Curve::P256, 32),
                "P-384" => (Curve::P384, 48),
                _ => return None,
            };
            let (x, y) = (bytes("x")?, bytes("y")?);
            if x.len() != len || y.len() != len {
                return None;
            }
            let mut point = Vec::with_capacity(1 + 2 * len);
            point.push(0x04);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            PublicKey::Ec { curve, point }
        }
        _ => return None,
    };
    Some(Jwk {
        kid: text("kid").map(str::to_string),
        alg: text("alg").map(str::to_string),
        key,
    })
}

/// RFC 7518 integers carry no leading zero bytes, but some producers add one.
fn strip_leading_zeros(mut bytes: Vec<u8>) -> Vec<u8> {
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    bytes.drain(..zeros);
    bytes
}
