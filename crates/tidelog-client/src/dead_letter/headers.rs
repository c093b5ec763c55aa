//! The headers naming a dead-lettered record's origin and error: written by
//! [`super::DeadLetterHandler`], read back by [`DeadLetterOrigin::of`].
//!
//! The names are KIP-1191's (Kafka's `ShareGroupDLQStateManager`), the ones a tidelog
//! broker writes on the copies it makes for share groups. Consumer-side dead letters of
//! classic (and KIP-848) groups carry the same names with the same encoding (UTF-8
//! text, numbers in decimal), so one tool reads the dead-letter topics of both.

use bytes::Bytes;

/// The topic the record was read from.
pub const HEADER_TOPIC: &str = "__dlq.errors.topic";
/// Its partition, in decimal.
pub const HEADER_PARTITION: &str = "__dlq.errors.partition";
/// Its offset, in decimal.
pub const HEADER_OFFSET: &str = "__dlq.errors.offset";
/// The group that gave up on it.
pub const HEADER_GROUP: &str = "__dlq.errors.group";
/// How many times it was delivered (share groups) or attempted (this handler), in decimal.
pub const HEADER_DELIVERY_COUNT: &str = "__dlq.errors.delivery.count";
/// Why it was given up: here the `Display` of the last attempt's error.
pub const HEADER_MESSAGE: &str = "__dlq.errors.message";
/// Every name above; a copy carries each exactly once.
pub const HEADER_NAMES: [&str; 6] = [
    HEADER_TOPIC,
    HEADER_PARTITION,
    HEADER_OFFSET,
    HEADER_GROUP,
    HEADER_DELIVERY_COUNT,
    HEADER_MESSAGE,
];

/// The longest error message a copy carries, in bytes; an error whose `Display` runs
/// longer (a whole response body, a backtrace) is cut at a character boundary so one
/// failure cannot make the copy larger than the broker accepts.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// Where a dead-lettered record came from and why it was given up, as its headers
/// say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterOrigin {
    /// The source topic.
    pub topic: String,
    /// The source partition.
    pub partition: i32,
    /// The record's offset in the source partition.
    pub offset: i64,
    /// The group that gave up on it.
    pub group: String,
    /// Deliveries (share groups) or attempts (consumer-side handler).
    pub delivery_count: u32,
    /// Why.
    pub message: String,
}

impl DeadLetterOrigin {
    /// Reads the origin from a record's headers (the last value of each name wins);
    /// `None` when one is missing or does not parse, i.e. the record is no dead letter.
    pub fn of(headers: &[(String, Option<Bytes>)]) -> Option<DeadLetterOrigin> {
        let text = |name: &str| {
            headers
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.as_ref())
                .and_then(|v| std::str::from_utf8(v).ok())
        };
        Some(DeadLetterOrigin {
            topic: text(HEADER_TOPIC)?.to_owned(),
            partition: text(HEADER_PARTITION)?.parse().ok()?,
            offset: text(HEADER_OFFSET)?.parse().ok()?,
            group: text(HEADER_GROUP)?.to_owned(),
            delivery_count: text(HEADER_DELIVERY_COUNT)?.parse().ok()?,
            message: text(HEADER_MESSAGE)?.to_owned(),
        })
    }

    /// The six headers, in the broker's order; the message cut to
    /// [`MAX_MESSAGE_BYTES`].
    pub fn to_headers(&self) -> Vec<(String, Option<Bytes>)> {
        let values = [
            self.topic.clone(),
            self.partition.to_string(),
            self.offset.to_string(),
            self.group.clone(),
            self.delivery_count.to_string(),
            truncate(&self.message, MAX_MESSAGE_BYTES).to_owned(),
        ];
        HEADER_NAMES
            .iter()
            .zip(values)
            .map(|(name, value)| ((*name).to_owned(), Some(Bytes::from(value))))
            .collect()
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Whether `name` is one of the dead-letter headers (dropped from a record's own
/// headers when it is copied, so a record dead-lettered twice names only its last
/// origin).
pub(crate) fn is_dead_letter_header(name: &str) -> bool {
    HEADER_NAMES.contains(&name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn origin() -> DeadLetterOrigin {
        DeadLetterOrigin {
            topic: "payments".into(),
            partition: 2,
            offset: 41,
            group: "billing".into(),
            delivery_count: 3,
            message: "bad amount".into(),
        }
    }

    #[test]
    fn headers_carry_the_broker_names_and_decimal_text() {
        let headers = origin().to_headers();
        let got: Vec<(&str, &[u8])> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref().unwrap()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("__dlq.errors.topic", &b"payments"[..]),
                ("__dlq.errors.partition", b"2"),
                ("__dlq.errors.offset", b"41"),
                ("__dlq.errors.group", b"billing"),
                ("__dlq.errors.delivery.count", b"3"),
                ("__dlq.errors.message", b"bad amount"),
            ]
        );
        assert_eq!(DeadLetterOrigin::of(&headers), Some(origin()));
    }

    #[test]
    fn reads_a_broker_share_group_copy() {
        // What the broker's share-group writer puts on a copy (strings, decimal).
        let headers: Vec<(String, Option<Bytes>)> = [
            ("__dlq.errors.topic", "orders"),
            ("__dlq.errors.partition", "0"),
            ("__dlq.errors.offset", "7"),
            ("__dlq.errors.group", "sg"),
            ("__dlq.errors.delivery.count", "5"),
            (
                "__dlq.errors.message",
                "Offset delivery count exceeded the threshold.",
            ),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Some(Bytes::from(*v))))
        .collect();
        let o = DeadLetterOrigin::of(&headers).unwrap();
        assert_eq!((o.topic.as_str(), o.partition, o.offset), ("orders", 0, 7));
        assert_eq!((o.group.as_str(), o.delivery_count), ("sg", 5));
    }

    #[test]
    fn a_record_without_the_headers_is_no_dead_letter() {
        assert_eq!(DeadLetterOrigin::of(&[]), None);
        let mut headers = origin().to_headers();
        headers[1].1 = Some(Bytes::from("two"));
        assert_eq!(DeadLetterOrigin::of(&headers), None);
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let mut o = origin();
        o.message = "é".repeat(MAX_MESSAGE_BYTES); // two bytes each
        let headers = o.to_headers();
        let message = headers[5].1.as_ref().unwrap();
        assert_eq!(message.len(), MAX_MESSAGE_BYTES);
        assert!(std::str::from_utf8(message).is_ok());
        assert_eq!(truncate("aé", 2), "a");
        assert_eq!(truncate("short", 100), "short");
    }
}
