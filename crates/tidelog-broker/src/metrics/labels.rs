//! Label values: made safe for the text format, and named as operators search for them.

use std::borrow::Cow;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ApiKey;

/// A label value escaped for the Prometheus text format. The encoder writes values
/// verbatim, and group ids are any string a client chose: a quote, backslash or
/// newline in one must not break the exposition.
pub(super) fn escaped(value: &str) -> Cow<'_, str> {
    if !value.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The API's name as Kafka's own metrics label it (`Produce`, `ListOffsets`).
pub(super) fn api_name(key: ApiKey) -> String {
    format!("{key:?}")
}

/// The error's name as Kafka documents it (`UNKNOWN_TOPIC_OR_PARTITION`).
pub(crate) fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        Some(ResponseError::Unknown(_)) | None => format!("UNKNOWN_ERROR_CODE_{code}"),
        Some(error) => screaming_snake(&format!("{error:?}")),
    }
}

fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_only_what_the_text_format_needs() {
        assert!(matches!(escaped("group-1.a"), Cow::Borrowed("group-1.a")));
        assert_eq!(escaped("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn names_follow_kafka() {
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(56), "KAFKA_STORAGE_ERROR");
        assert_eq!(error_name(-12345), "UNKNOWN_ERROR_CODE_-12345");
        assert_eq!(api_name(ApiKey::ListOffsets), "ListOffsets");
    }
}
