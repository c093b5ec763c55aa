//! For tests only (this crate's, and others' through the `test-util` feature): two
//! test RSA keys (`testdata/`, they protect nothing), their JWKs, and RS256 signing.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use ring::rand::SystemRandom;
pub use ring::signature::RsaKeyPair;
use ring::signature::{self, RsaPublicKeyComponents};
use serde_json::{json, Value};

fn rsa_key(pem: &str) -> RsaKeyPair {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der = STANDARD.decode(body).unwrap_or_default();
    match RsaKeyPair::from_pkcs8(&der) {
        Ok(key) => key,
        Err(e) => panic!("the test key does not read: {e}"),
    }
}

pub fn rsa_key_a() -> RsaKeyPair {
    rsa_key(include_str!("testdata/rsa-a.pem"))
}

pub fn rsa_key_b() -> RsaKeyPair {
    rsa_key(include_str!("testdata/rsa-b.pem"))
}

pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// `key`'s public JWK named `kid`, for RS256 signatures.
pub fn rsa_jwk(key: &RsaKeyPair, kid: &str) -> Value {
    let public = RsaPublicKeyComponents::<Vec<u8>>::from(key.public());
    json!({
        "kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
        "n": b64(&public.n), "e": b64(&public.e),
    })
}

/// A JWS of `header` and `claims` signed by `key` with RSASSA-PKCS1-v1_5 SHA-256
/// (whatever `alg` the header claims).
pub fn rs256(key: &RsaKeyPair, header: &Value, claims: &Value) -> String {
    let input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let mut sig = vec![0; key.public().modulus_len()];
    if let Err(e) = key.sign(
        &signature::RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        input.as_bytes(),
        &mut sig,
    ) {
        panic!("signing failed: {e}");
    }
    format!("{input}.{}", b64(&sig))
}
