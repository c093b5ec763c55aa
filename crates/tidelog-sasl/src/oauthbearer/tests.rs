use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair};
use serde_json::json;

use super::jwks::Jwks;
use super::jwt::{JwtError, Rules, SignedJwt};
use super::test_util::{b64, rsa_jwk, rsa_key_a as key_a, rsa_key_b as key_b, RsaKeyPair};
use super::*;

/// Unix time of "now" in these tests, in seconds.
const NOW: i64 = 1_800_000_000;

fn rs256(key: &RsaKeyPair, header: serde_json::Value, claims: serde_json::Value) -> String {
    test_util::rs256(key, &header, &claims)
}

fn claims() -> serde_json::Value {
    json!({
        "sub": "alice", "iss": "https://idp.example", "aud": ["kafka", "other"],
        "iat": NOW - 10, "exp": NOW + 300, "scope": "produce consume",
    })
}

fn rules() -> Rules {
    Rules {
        expected_audiences: vec!["kafka".into()],
        expected_issuer: Some("https://idp.example".into()),
        clock_skew_secs: 30,
        sub_claim: "sub".into(),
        scope_claim: "scope".into(),
    }
}

fn keys(entries: &[serde_json::Value]) -> Jwks {
    Jwks::parse(json!({ "keys": entries }).to_string().as_bytes()).unwrap()
}

/// Decodes, verifies and checks `token` as the broker does, at [`NOW`].
fn validate(token: &str, jwks: &Jwks, rules: &Rules) -> Result<jwt::ValidToken, JwtError> {
    let jwt = SignedJwt::decode(token)?;
    jwt.verify(jwks)?;
    jwt.check_claims(rules, NOW * 1000)
}

#[test]
fn a_good_token_names_its_subject_and_expiry() {
    let a = key_a();
    let token = rs256(
        &a,
        json!({"alg": "RS256", "kid": "a", "typ": "JWT"}),
        claims(),
    );
    let valid = validate(&token, &keys(&[rsa_jwk(&a, "a")]), &rules()).unwrap();
    assert_eq!(valid.subject, "alice");
    assert_eq!(valid.expires_at_ms, (NOW + 300) * 1000);
    assert_eq!(valid.issued_at_ms, (NOW - 10) * 1000);
    assert_eq!(valid.scopes, ["produce consume"]);
    // A configured sub claim name is read instead of sub.
    let mut c = claims();
    c["client_id"] = json!("svc-1");
    let token = rs256(&a, json!({"alg": "RS256", "kid": "a"}), c);
    let rules = Rules {
        sub_claim: "client_id".into(),
        ..rules()
    };
    let valid = validate(&token, &keys(&[rsa_jwk(&a, "a")]), &rules).unwrap();
    assert_eq!(valid.subject, "svc-1");
}

#[test]
fn expiry_and_not_before_allow_the_clock_skew() {
    let a = key_a();
    let jwks = keys(&[rsa_jwk(&a, "a")]);
    let with = |exp: i64, nbf: Option<i64>| {
        let mut c = claims();
        c["exp"] = json!(exp);
        if let Some(nbf) = nbf {
            c["nbf"] = json!(nbf);
        }
        rs256(&a, json!({"alg": "RS256", "kid": "a"}), c)
    };
    assert_eq!(
        validate(&with(NOW - 60, None), &jwks, &rules()),
        Err(JwtError::Expired)
    );
    // Expired 20 s ago, within the 30 s skew.
    assert!(validate(&with(NOW - 20, None), &jwks, &rules()).is_ok());
    assert_eq!(
        validate(&with(NOW - 30, None), &jwks, &rules()),
        Err(JwtError::Expired)
    );
    assert_eq!(
        validate(&with(NOW + 300, Some(NOW + 60)), &jwks, &rules()),
        Err(JwtError::NotYetValid)
    );
    assert!(validate(&with(NOW + 300, Some(NOW + 20)), &jwks, &rules()).is_ok());
    let mut c = claims();
    c.as_object_mut().unwrap().remove("exp");
    let token = rs256(&a, json!({"alg": "RS256", "kid": "a"}), c);
    assert_eq!(
        validate(&token, &jwks, &rules()),
        Err(JwtError::MissingClaim("exp".into()))
    );
    let mut c = claims();
    c.as_object_mut().unwrap().remove("iat");
    let token = rs256(&a, json!({"alg": "RS256", "kid": "a"}), c);
    assert_eq!(
        validate(&token, &jwks, &rules()),
        Err(JwtError::MissingClaim("iat".into()))
    );
}

#[test]
fn issuer_and_audience_must_be_the_expected_ones() {
    let a = key_a();
    let jwks = keys(&[rsa_jwk(&a, "a")]);
    let token = |c: serde_json::Value| rs256(&a, json!({"alg": "RS256", "kid": "a"}), c);
    let mut c = claims();
    c["iss"] = json!("https://evil.example");
    assert_eq!(
        validate(&token(c), &jwks, &rules()),
        Err(JwtError::WrongIssuer)
    );
    let mut c = claims();
    c["aud"] = json!("billing");
    assert_eq!(
        validate(&token(c), &jwks, &rules()),
        Err(JwtError::WrongAudience)
    );
    let mut c = claims();
    c.as_object_mut().unwrap().remove("aud");
    assert_eq!(
        validate(&token(c.clone()), &jwks, &rules()),
        Err(JwtError::MissingClaim("aud".into()))
    );
    // Without an expected audience: a token without aud passes, one with aud does not.
    let open = Rules {
        expected_audiences: Vec::new(),
        expected_issuer: None,
        ..rules()
    };
    assert!(validate(&token(c), &jwks, &open).is_ok());
    assert_eq!(
        validate(&token(claims()), &jwks, &open),
        Err(JwtError::UnexpectedAudience)
    );
}

#[test]
fn a_signature_by_another_key_or_algorithm_none_is_refused() {
    let (a, b) = (key_a(), key_b());
    let jwks = keys(&[rsa_jwk(&a, "a")]);
    let forged = rs256(&b, json!({"alg": "RS256", "kid": "a"}), claims());
    assert_eq!(
        validate(&forged, &jwks, &rules()),
        Err(JwtError::BadSignature)
    );
    // A good token whose payload was changed after signing.
    let good = rs256(&a, json!({"alg": "RS256", "kid": "a"}), claims());
    let mut parts: Vec<&str> = good.split('.').collect();
    let mut c = claims();
    c["sub"] = json!("admin");
    let changed = b64(c.to_string().as_bytes());
    parts[1] = &changed;
    assert_eq!(
        validate(&parts.join("."), &jwks, &rules()),
        Err(JwtError::BadSignature)
    );
    let unsigned = format!(
        "{}.{}.",
        b64(br#"{"alg":"none"}"#),
        b64(claims().to_string().as_bytes())
    );
    assert_eq!(
        validate(&unsigned, &jwks, &rules()).unwrap_err(),
        JwtError::Algorithm
    );
    // An HMAC token cannot be checked against the public key's bytes.
    let hs = rs256(&a, json!({"alg": "HS256", "kid": "a"}), claims());
    assert_eq!(validate(&hs, &jwks, &rules()), Err(JwtError::Algorithm));
}

#[test]
fn an_unknown_kid_is_told_apart_and_a_fresher_set_verifies_it() {
    let (a, b) = (key_a(), key_b());
    let token = rs256(&b, json!({"alg": "RS256", "kid": "b"}), claims());
    let old = keys(&[rsa_jwk(&a, "a")]);
    assert_eq!(validate(&token, &old, &rules()), Err(JwtError::UnknownKid));
    let rotated = keys(&[rsa_jwk(&a, "a"), rsa_jwk(&b, "b")]);
    assert!(rotated.has_kid("b"));
    assert_eq!(
        validate(&token, &rotated, &rules()).unwrap().subject,
        "alice"
    );
    // Without a kid, any key that fits is tried.
    let no_kid = rs256(&b, json!({"alg": "RS256"}), claims());
    assert!(validate(&no_kid, &rotated, &rules()).is_ok());
    assert_eq!(
        validate(&no_kid, &old, &rules()),
        Err(JwtError::BadSignature)
    );
}

#[test]
fn es256_tokens_verify_against_ec_keys() {
    let rng = SystemRandom::new();
    let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
    let key = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
    let point = key.public_key().as_ref();
    let jwks = keys(&[json!({
        "kty": "EC", "crv": "P-256", "kid": "ec",
        "x": b64(&point[1..33]), "y": b64(&point[33..]),
    })]);
    let input = format!(
        "{}.{}",
        b64(br#"{"alg":"ES256","kid":"ec"}"#),
        b64(claims().to_string().as_bytes())
    );
    let sig = key.sign(&rng, input.as_bytes()).unwrap();
    let token = format!("{input}.{}", b64(sig.as_ref()));
    assert_eq!(validate(&token, &jwks, &rules()).unwrap().subject, "alice");
    // The same key set has no RSA key for an RS256 token.
    let rs = rs256(&key_a(), json!({"alg": "RS256", "kid": "ec"}), claims());
    assert_eq!(validate(&rs, &jwks, &rules()), Err(JwtError::NoFittingKey));
}

#[test]
fn malformed_tokens_and_key_sets() {
    let jwks = keys(&[rsa_jwk(&key_a(), "a")]);
    for bad in ["", "a.b", "a.b.c.d", "!!.e30.", "e30.e30.AA"] {
        assert!(
            matches!(
                validate(bad, &jwks, &rules()),
                Err(JwtError::Malformed(_)) | Err(JwtError::Algorithm)
            ),
            "{bad:?}"
        );
    }
    assert!(Jwks::parse(b"not json").is_err());
    assert!(Jwks::parse(b"{}").is_err());
    let mixed = keys(&[
        json!({"kty": "oct", "k": "c2VjcmV0"}),
        json!({"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB"}),
        rsa_jwk(&key_a(), "a"),
    ]);
    assert_eq!((mixed.keys().len(), mixed.skipped()), (1, 2));
}

#[test]
fn client_first_messages_as_kafka_frames_them() {
    let parsed = parse_client_first(b"n,,\x01auth=Bearer abc.def.ghi\x01\x01").unwrap();
    assert_eq!(
        parsed,
        ClientFirst {
            authzid: "",
            token: "abc.def.ghi"
        }
    );
    assert_eq!(
        parse_client_first(&client_first("x.y.z")).unwrap().token,
        "x.y.z"
    );
    // An authorization id and extensions (Kafka's clients send some), and the scheme
    // in any case.
    let parsed =
        parse_client_first(b"n,a=alice,\x01auth=bearer  t.o.k\x01traceId=42\x01\x01").unwrap();
    assert_eq!((parsed.authzid, parsed.token), ("alice", "t.o.k"));
    for bad in [
        &b"y,,\x01auth=Bearer t\x01\x01"[..],
        b"n,,auth=Bearer t\x01\x01",
        b"n,,\x01auth=Bearer t\x01",
        b"n,,\x01\x01",
        b"n,,\x01auth=Basic dXNlcg\x01\x01",
        b"n,,\x01auth=Bearer \x01\x01",
        b"n,,\x01auth=Bearer t/x\x01\x01",
        b"n,,\x01traceId=1\x01\x01",
        b"n,,\x01auth=Bearer t\x01auth=Bearer u\x01\x01",
        b"n,,\x01au th=Bearer t\x01\x01",
        b"\xff",
    ] {
        assert!(parse_client_first(bad).is_err(), "{bad:?}");
    }
    assert_eq!(invalid_token_challenge(), br#"{"status":"invalid_token"}"#);
}

#[test]
fn the_client_acknowledges_an_error_challenge() {
    use crate::login::{ClientLogin, Mechanism};
    let (mut login, first) = ClientLogin::start(Mechanism::OAuthBearer, "", "t.o.k");
    assert_eq!(parse_client_first(&first).unwrap().token, "t.o.k");
    assert_eq!(
        login.answer(&invalid_token_challenge()),
        Ok(Some(ERROR_ACKNOWLEDGEMENT.to_vec()))
    );
    let (mut login, _) = ClientLogin::start(Mechanism::OAuthBearer, "", "t.o.k");
    assert_eq!(login.answer(b""), Ok(None));
}
