//! The entity filter of DescribeClientQuotas, checked with the rules of Kafka's
//! `ClientQuotasImage.describe`: entity types `user`, `client-id` and `ip`, each at most
//! once (an unknown type UNSUPPORTED_VERSION, everything else INVALID_REQUEST), a
//! match string exactly when the match type is EXACT, and `ip` never combined
//! with `user` or `client-id`.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use tidelog_controller::quota::QuotaMatch;

const USER: &str = "user";
const CLIENT_ID: &str = "client-id";
const IP: &str = "ip";

const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

/// Why a filter is refused: the Kafka error code and message.
pub(crate) type Refusal = (i16, String);

fn invalid(message: impl Into<String>) -> Refusal {
    (ResponseError::InvalidRequest.code(), message.into())
}

fn unsupported(message: impl Into<String>) -> Refusal {
    (ResponseError::UnsupportedVersion.code(), message.into())
}

/// Checks every component; the first fault refuses the whole request. A valid filter
/// comes back as `(entity type, match)` pairs.
pub(crate) fn check(components: &[ComponentData]) -> Result<Vec<(String, QuotaMatch)>, Refusal> {
    let mut seen: Vec<&str> = Vec::with_capacity(components.len().min(3));
    let mut matches = Vec::with_capacity(components.len().min(3));
    for c in components {
        let kind = c.entity_type.as_str();
        if kind.is_empty() {
            return Err(invalid("Invalid empty entity type."));
        }
        if seen.contains(&kind) {
            return Err(invalid(format!(
                "Entity type {kind} cannot appear more than once in the filter."
            )));
        }
        if ![USER, CLIENT_ID, IP].contains(&kind) {
            return Err(unsupported(format!("Unsupported entity type {kind}")));
        }
        match (c.match_type, c._match.is_some()) {
            (MATCH_EXACT, false) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                ))
            }
            (MATCH_DEFAULT, true) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                ))
            }
            (MATCH_SPECIFIED, true) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                ))
            }
            (other, _) if !(MATCH_EXACT..=MATCH_SPECIFIED).contains(&other) => {
                return Err(invalid(format!("Unknown match type {other}")))
            }
            _ => {}
        }
        let matched = match (c.match_type, &c._match) {
            (MATCH_EXACT, Some(name)) => QuotaMatch::Exact(name.to_string()),
            (MATCH_DEFAULT, _) => QuotaMatch::Default,
            _ => QuotaMatch::Specified,
        };
        matches.push((kind.to_string(), matched));
        seen.push(kind);
    }
    if seen.contains(&IP) && (seen.contains(&USER) || seen.contains(&CLIENT_ID)) {
        return Err(invalid(
            "Invalid entity filter component combination. IP filter component should not be \
             used with user or clientId filter component.",
        ));
    }
    Ok(matches)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::StrBytes;

    fn component(kind: &str, match_type: i8, name: Option<&str>) -> ComponentData {
        ComponentData::default()
            .with_entity_type(StrBytes::from_string(kind.to_string()))
            .with_match_type(match_type)
            .with_match(name.map(|n| StrBytes::from_string(n.to_string())))
    }

    #[test]
    fn filters_are_checked_as_kafka_does() {
        assert!(check(&[]).is_ok());
        assert!(check(&[component(USER, MATCH_SPECIFIED, None)]).is_ok());
        assert!(check(&[
            component(USER, MATCH_EXACT, Some("alice")),
            component(CLIENT_ID, MATCH_DEFAULT, None)
        ])
        .is_ok());
        let invalid = ResponseError::InvalidRequest.code();
        let unsupported = ResponseError::UnsupportedVersion.code();
        let code = |c: &[ComponentData]| check(c).err().map(|(code, _)| code);
        assert_eq!(code(&[component(USER, MATCH_EXACT, None)]), Some(invalid));
        assert_eq!(
            code(&[component("group", MATCH_SPECIFIED, None)]),
            Some(unsupported)
        );
        assert_eq!(code(&[component(USER, 7, None)]), Some(invalid));
        assert_eq!(
            code(&[
                component(USER, MATCH_SPECIFIED, None),
                component(USER, MATCH_SPECIFIED, None)
            ]),
            Some(invalid)
        );
        assert_eq!(
            code(&[
                component(IP, MATCH_SPECIFIED, None),
                component(USER, MATCH_SPECIFIED, None)
            ]),
            Some(invalid)
        );
    }
}
