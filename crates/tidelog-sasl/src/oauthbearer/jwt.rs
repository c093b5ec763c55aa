//! A signed JWT (RFC 7519, JWS compact form) checked as Kafka's broker checks an
//! OAUTHBEARER token (OAuthBearerValidatorCallbackHandler, KIP-768, with jose4j's
//! rules under it):
//!
//! - the signature, with a key of the JWKS: the one whose `kid` the header names, or
//!   when it names none, any key that fits the algorithm; `alg: none` is refused;
//!   RS256/384/512, PS256/384/512, ES256 and ES384 are verified (ring);
//! - `exp` and `iat` must be there; the token is refused from `exp` + skew on, and
//!   before `nbf` - skew when it has an `nbf`;
//! - with an expected issuer, `iss` must be it; with expected audiences, `aud` must
//!   name one of them, and without any, a token that has an `aud` is refused (an
//!   audience the broker does not claim to be is not its own: RFC 7519 §4.1.3);
//! - the subject claim (`sub` by default) must be a non-empty string: it is the
//!   principal's name. The scope claim, when there, is a string or a list of them.
//!
//! Errors name the rule that failed, never a value from the token.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::{Map, Value};

use super::jwks::{Curve, Jwk, Jwks, PublicKey};

/// Keys tried for one token whose header names no `kid` (or a `kid` several keys
/// share): each try is a signature verification.
const MAX_KEYS_TRIED: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    #[error("the token's signature algorithm is none or not one tidelog verifies")]
    Algorithm,
    #[error("no key of the JWKS has the token's kid")]
    UnknownKid,
    #[error("no key of the JWKS fits the token's algorithm")]
    NoFittingKey,
    #[error("the signature does not verify")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet (nbf)")]
    NotYetValid,
    #[error("the token has no {0} claim")]
    MissingClaim(String),
    #[error("the token's {0} claim is malformed")]
    MalformedClaim(String),
    #[error("the token's issuer is not sasl.oauthbearer.expected.issuer")]
    WrongIssuer,
    #[error("the token's audience is not one of sasl.oauthbearer.expected.audience")]
    WrongAudience,
    #[error("the token names an audience but sasl.oauthbearer.expected.audience is not set")]
    UnexpectedAudience,
}

/// What a token must satisfy besides its signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// `sasl.oauthbearer.expected.audience`; empty: none.
    pub expected_audiences: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer`.
    pub expected_issuer: Option<String>,
    /// `sasl.oauthbearer.clock.skew.seconds`.
    pub clock_skew_secs: i64,
    /// `sasl.oauthbearer.sub.claim.name`.
    pub sub_claim: String,
    /// `sasl.oauthbearer.scope.claim.name`.
    pub scope_claim: String,
}

/// A token that passed: who it names, and when it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidToken {
    pub subject: String,
    /// `exp`, in Unix milliseconds.
    pub expires_at_ms: i64,
    /// `iat`, in Unix milliseconds.
    pub issued_at_ms: i64,
    pub scopes: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algorithm {
    Rs256,
    Rs384,
    Rs512,
    Ps256,
    Ps384,
    Ps512,
    Es256,
    Es384,
}

impl Algorithm {
    fn from_name(name: &str) -> Option<Algorithm> {
        Some(match name {
            "RS256" => Algorithm::Rs256,
            "RS384" => Algorithm::Rs384,
            "RS512" => Algorithm::Rs512,
            "PS256" => Algorithm::Ps256,
            "PS384" => Algorithm::Ps384,
            "PS512" => Algorithm::Ps512,
            "ES256" => Algorithm::Es256,
            "ES384" => Algorithm::Es384,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Algorithm::Rs256 => "RS256",
            Algorithm::Rs384 => "RS384",
            Algorithm::Rs512 => "RS512",
            Algorithm::Ps256 => "PS256",
            Algorithm::Ps384 => "PS384",
            Algorithm::Ps512 => "PS512",
            Algorithm::Es256 => "ES256",
            Algorithm::Es384 => "ES384",
        }
    }

    fn rsa(self) -> Option<&'static signature::RsaParameters> {
        Some(match self {
            Algorithm::Rs256 => &signature::RSA_PKCS1_2048_8192_SHA256,
            Algorithm::Rs384 => &signature::RSA_PKCS1_2048_8192_SHA384,
            Algorithm::Rs512 => &signature::RSA_PKCS1_2048_8192_SHA512,
            Algorithm::Ps256 => &signature::RSA_PSS_2048_8192_SHA256,
            Algorithm::Ps384 => &signature::RSA_PSS_2048_8192_SHA384,
            Algorithm::Ps512 => &signature::RSA_PSS_2048_8192_SHA512,
            Algorithm::Es256 | Algorithm::Es384 => return None,
        })
    }

    fn curve(self) -> Option<(Curve, &'static signature::EcdsaVerificationAlgorithm)> {
        match self {
            Algorithm::Es256 => Some((Curve::P256, &signature::ECDSA_P256_SHA256_FIXED)),
            Algorithm::Es384 => Some((Curve::P384, &signature::ECDSA_P384_SHA384_FIXED)),
            _ => None,
        }
    }

    fn fits(self, key: &Jwk) -> bool {
        let kind = match (&key.key, self.curve()) {
            (PublicKey::Rsa { .. }, None) => true,
            (PublicKey::Ec { curve, .. }, Some((wanted, _))) => *curve == wanted,
            _ => false,
        };
        kind && key.alg.as_deref().is_none_or(|alg| alg == self.name())
    }

    fn verify(self, key: &PublicKey, message: &[u8], sig: &[u8]) -> bool {
        match (key, self.rsa(), self.curve()) {
            (PublicKey::Rsa { n, e }, Some(params), _) => RsaPublicKeyComponents { n, e }
                .verify(params, message, sig)
                .is_ok(),
            (PublicKey::Ec { point, .. }, _, Some((_, algorithm))) => {
                UnparsedPublicKey::new(algorithm, point)
                    .verify(message, sig)
                    .is_ok()
            }
            _ => false,
        }
    }
}

/// A token taken apart, its signature not checked yet.
#[derive(Debug)]
pub struct SignedJwt {
    algorithm: Algorithm,
    kid: Option<String>,
    /// `<header>.<payload>` as sent: what the signature covers.
    signing_input: String,
    signature: Vec<u8>,
    claims: Map<String, Value>,
}

impl SignedJwt {
    pub fn decode(token: &str) -> Result<SignedJwt, JwtError> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtError::Malformed("a JWS is three dot-separated parts"));
        };
        let header = json_object(header, "the header is not a base64url JSON object")?;
        let claims = json_object(payload, "the payload is not a base64url JSON object")?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| JwtError::Malformed("the signature is not base64url"))?;
        if header.contains_key("crit") {
            // No critical header extension is understood here (RFC 7515 §4.1.11).
            return Err(JwtError::Malformed("a crit header parameter"));
        }
        let algorithm = header
            .get("alg")
            .and_then(Value::as_str)
            .and_then(Algorithm::from_name)
            .ok_or(JwtError::Algorithm)?;
        let kid = match header.get("kid") {
            None => None,
            Some(Value::String(kid)) => Some(kid.clone()),
            Some(_) => return Err(JwtError::Malformed("the kid is not a string")),
        };
        let signing_input = token
            .rsplit_once('.')
            .map_or_else(String::new, |(input, _)| input.to_string());
        Ok(SignedJwt {
            algorithm,
            kid,
            signing_input,
            signature,
            claims,
        })
    }

    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// Checks the signature with a key of `keys`. [`JwtError::UnknownKid`] tells the
    /// caller that a fresher key set might have the key.
    pub fn verify(&self, keys: &Jwks) -> Result<(), JwtError> {
        let named: Vec<&Jwk> = keys
            .keys()
            .iter()
            .filter(|k| self.kid.is_none() || k.kid == self.kid)
            .collect();
        if self.kid.is_some() && named.is_empty() {
            return Err(JwtError::UnknownKid);
        }
        let mut fitting = named
            .into_iter()
            .filter(|k| self.algorithm.fits(k))
            .take(MAX_KEYS_TRIED)
            .peekable();
        if fitting.peek().is_none() {
            return Err(JwtError::NoFittingKey);
        }
        let message = self.signing_input.as_bytes();
        if fitting.any(|k| self.algorithm.verify(&k.key, message, &self.signature)) {
            Ok(())
        } else {
            Err(JwtError::BadSignature)
        }
    }

    /// Checks the claims at `now_ms` (Unix milliseconds). Call after [`Self::verify`].
    pub fn check_claims(&self, rules: &Rules, now_ms: i64) -> Result<ValidToken, JwtError> {
        let skew_ms = rules.clock_skew_secs.saturating_mul(1000);
        let expires_at_ms = self
            .numeric_date("exp")?
            .ok_or_else(|| JwtError::MissingClaim("exp".into()))?;
        if now_ms >= expires_at_ms.saturating_add(skew_ms) {
            return Err(JwtError::Expired);
        }
        if let Some(not_before_ms) = self.numeric_date("nbf")? {
            if now_ms.saturating_add(skew_ms) < not_before_ms {
                return Err(JwtError::NotYetValid);
            }
        }
        let issued_at_ms = self
            .numeric_date("iat")?
            .ok_or_else(|| JwtError::MissingClaim("iat".into()))?;
        if issued_at_ms < 0 {
            return Err(JwtError::MalformedClaim("iat".into()));
        }
        if let Some(expected) = &rules.expected_issuer {
            match self.claims.get("iss") {
                Some(Value::String(iss)) if iss == expected => {}
                Some(Value::String(_)) => return Err(JwtError::WrongIssuer),
                Some(_) => return Err(JwtError::MalformedClaim("iss".into())),
                None => return Err(JwtError::MissingClaim("iss".into())),
            }
        }
        self.check_audience(&rules.expected_audiences)?;
        let subject = match self.claims.get(&rules.sub_claim) {
            Some(Value::String(sub)) if !sub.trim().is_empty() => sub.trim().to_string(),
            Some(Value::String(_)) | Some(_) => {
                return Err(JwtError::MalformedClaim(rules.sub_claim.clone()))
            }
            None => return Err(JwtError::MissingClaim(rules.sub_claim.clone())),
        };
        Ok(ValidToken {
            subject,
            expires_at_ms,
            issued_at_ms,
            scopes: self.scopes(&rules.scope_claim)?,
        })
    }

    fn check_audience(&self, expected: &[String]) -> Result<(), JwtError> {
        let audiences: Vec<&str> = match self.claims.get("aud") {
            None if expected.is_empty() => return Ok(()),
            None => return Err(JwtError::MissingClaim("aud".into())),
            Some(Value::String(aud)) => vec![aud.as_str()],
            Some(Value::Array(list)) => list
                .iter()
                .map(Value::as_str)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| JwtError::MalformedClaim("aud".into()))?,
            Some(_) => return Err(JwtError::MalformedClaim("aud".into())),
        };
        if expected.is_empty() {
            return Err(JwtError::UnexpectedAudience);
        }
        if audiences.iter().any(|a| expected.iter().any(|e| e == a)) {
            Ok(())
        } else {
            Err(JwtError::WrongAudience)
        }
    }

    fn scopes(&self, claim: &str) -> Result<Vec<String>, JwtError> {
        let malformed = || JwtError::MalformedClaim(claim.to_string());
        let raw: Vec<&str> = match self.claims.get(claim) {
            None => Vec::new(),
            Some(Value::String(scope)) => vec![scope.as_str()],
            Some(Value::Array(list)) => list
                .iter()
                .map(Value::as_str)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(malformed)?,
            Some(_) => return Err(malformed()),
        };
        let mut scopes: Vec<String> = Vec::with_capacity(raw.len());
        for scope in raw.iter().map(|s| s.trim()) {
            if scope.is_empty() {
                return Err(malformed());
            }
            if !scopes.iter().any(|s| s == scope) {
                scopes.push(scope.to_string());
            }
        }
        Ok(scopes)
    }

    /// A NumericDate claim in milliseconds (whole seconds, as jose4j reads them).
    fn numeric_date(&self, claim: &str) -> Result<Option<i64>, JwtError> {
        let Some(value) = self.claims.get(claim) else {
            return Ok(None);
        };
        let seconds = value
            .as_i64()
            .or_else(|| {
                value
                    .as_f64()
                    .filter(|f| f.is_finite() && f.abs() < 1e15)
                    .map(|f| f.trunc() as i64)
            })
            .ok_or_else(|| JwtError::MalformedClaim(claim.to_string()))?;
        Ok(Some(seconds.saturating_mul(1000)))
    }
}

fn json_object(part: &str, what: &'static str) -> Result<Map<String, Value>, JwtError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| JwtError::Malformed(what))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(JwtError::Malformed(what)),
    }
}
