use super::*;

/// RFC 7677 section 3: user "user", password "pencil".
const CLIENT_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
const SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const SALT: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";
const CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn rfc_credential() -> ScramCredential {
    let salt = unb64(SALT).unwrap();
    ScramCredential::from_password(ScramMechanism::Sha256, "pencil", salt, 4096)
}

#[test]
fn server_matches_rfc_7677() {
    let mut server = ScramServer::with_nonce(ScramMechanism::Sha256, SERVER_NONCE.into());
    let first = server
        .step(CLIENT_FIRST.as_bytes(), |user| {
            (user == "user").then(rfc_credential)
        })
        .unwrap();
    assert_eq!(
        first,
        ServerStep::Continue(SERVER_FIRST.as_bytes().to_vec())
    );
    let last = server.step(CLIENT_FINAL.as_bytes(), |_| None).unwrap();
    assert_eq!(
        last,
        ServerStep::Done {
            user: "user".into(),
            message: SERVER_FINAL.as_bytes().to_vec()
        }
    );
    assert!(server.step(b"again", |_| None).is_err());
}

#[test]
fn client_matches_rfc_7677() {
    let mut client = ScramClient::with_nonce(
        ScramMechanism::Sha256,
        "user",
        "pencil",
        CLIENT_NONCE.into(),
    );
    assert_eq!(client.client_first(), CLIENT_FIRST.as_bytes());
    let last = client.client_final(SERVER_FIRST.as_bytes()).unwrap();
    assert_eq!(last, CLIENT_FINAL.as_bytes());
    client.verify_server_final(SERVER_FINAL.as_bytes()).unwrap();
    assert_eq!(
        client.verify_server_final(b"v=AAAA"),
        Err(SaslError::BadServerSignature)
    );
}

fn exchange(
    mechanism: ScramMechanism,
    password: &str,
    stored: &ScramCredential,
) -> Result<String, SaslError> {
    let mut client = ScramClient::new(mechanism, "al,i=ce", password);
    let mut server = ScramServer::new(mechanism);
    let ServerStep::Continue(first) = server.step(&client.client_first(), |u| {
        (u == "al,i=ce").then(|| stored.clone())
    })?
    else {
        panic!("server finished early");
    };
    let last = client.client_final(&first)?;
    match server.step(&last, |_| None)? {
        ServerStep::Done { user, message } => {
            client.verify_server_final(&message)?;
            Ok(user)
        }
        ServerStep::Continue(_) => panic!("server did not finish"),
    }
}

#[test]
fn both_mechanisms_round_trip_and_refuse_a_wrong_password() {
    for mechanism in ScramMechanism::ALL {
        let stored = ScramCredential::from_password(mechanism, "secret", random_bytes(16), 4096);
        assert_eq!(exchange(mechanism, "secret", &stored).unwrap(), "al,i=ce");
        assert_eq!(
            exchange(mechanism, "wrong", &stored),
            Err(SaslError::InvalidCredentials)
        );
    }
}

#[test]
fn refused_client_first_messages() {
    let cases = [
        ("y,,n=user,r=abc", "channel binding"),
        ("p=tls-unique,,n=user,r=abc", "bad gs2 flag"),
        ("n,a=other,n=user,r=abc", "authzid"),
        ("n,,n=user,r=abc,tokenauth=true", "tokenauth"),
        ("n,,n=,r=abc", "empty"),
        ("n,,n=us=er,r=abc", "escape"),
        ("n,,n=user", "nonce"),
        ("n,,n=nobody,r=abc", "unknown"),
    ];
    for (message, why) in cases {
        let mut server = ScramServer::new(ScramMechanism::Sha512);
        let outcome = server.step(message.as_bytes(), |u| (u == "user").then(rfc_credential));
        assert!(outcome.is_err(), "{message} ({why})");
    }
    // The same user as authzid is allowed, as an escaped name is.
    let mut server = ScramServer::new(ScramMechanism::Sha256);
    assert!(server
        .step(b"n,a=user,n=user,r=abc", |u| (u == "user")
            .then(rfc_credential))
        .is_ok());
}

#[test]
fn mechanism_names_and_ids() {
    assert_eq!(
        ScramMechanism::from_name("scram-sha-512"),
        Some(ScramMechanism::Sha512)
    );
    assert_eq!(
        ScramMechanism::from_type_id(1),
        Some(ScramMechanism::Sha256)
    );
    assert_eq!(ScramMechanism::from_type_id(0), None);
    assert_eq!(decode_saslname("a=2Cb=3Dc").unwrap(), "a,b=c");
    assert_eq!(encode_saslname("a,b=c"), "a=2Cb=3Dc");
}

#[test]
fn a_whole_password_verifies_against_the_stored_keys_only_when_it_is_the_one() {
    for mechanism in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
        let credential = ScramCredential::from_password(mechanism, "s3cret", vec![7; 16], 4096);
        assert!(credential.verifies(mechanism, "s3cret"));
        assert!(!credential.verifies(mechanism, "s3cret "));
        assert!(!credential.verifies(mechanism, ""));
        let other = match mechanism {
            ScramMechanism::Sha256 => ScramMechanism::Sha512,
            ScramMechanism::Sha512 => ScramMechanism::Sha256,
        };
        assert!(
            !credential.verifies(other, "s3cret"),
            "another mechanism's keys"
        );
    }
}
