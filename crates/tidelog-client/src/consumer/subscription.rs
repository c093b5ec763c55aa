//! Kafka's `ConsumerProtocolSubscription` (the JoinGroup metadata of a consumer), all
//! four versions, none of them flexible:
//!
//! - v0: `i16 version, [string] topics, bytes user_data (-1 = null)`
//! - v1: + `[(string topic, [i32] partitions)] owned_partitions` (KIP-429)
//! - v2: + `i32 generation_id` (-1 when unknown)
//! - v3: + `string rack_id (-1 = null)`
//!
//! A cooperative member must tell the leader what it owns and since which generation,
//! so that the leader moves a partition only after its owner gave it up. Readers of any
//! version stop at what was whole: a malformed tail loses the later fields only.

use std::collections::BTreeMap;

use bytes::{BufMut, Bytes, BytesMut};

use crate::groups::Cursor;
use crate::partition_admin::TopicPartition;

/// A decoded subscription.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Subscription {
    pub(crate) topics: Vec<String>,
    pub(crate) user_data: Option<Bytes>,
    pub(crate) owned: Vec<TopicPartition>,
    /// The generation `owned` comes from; -1 when not sent.
    pub(crate) generation: i32,
    /// `client.rack` (v3+).
    pub(crate) rack: Option<String>,
}

/// The version a subscription needs: 3 with a rack, 2 with ownership (cooperative),
/// else 0.
pub(crate) fn version_for(s: &Subscription, cooperative: bool) -> i16 {
    if s.rack.is_some() {
        3
    } else if cooperative {
        2
    } else {
        0
    }
}

/// Encodes `s` at `version` (0..=3); fields newer than the version are left out.
pub(crate) fn encode(s: &Subscription, version: i16) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(version);
    put_len(&mut b, s.topics.len());
    for t in &s.topics {
        put_string(&mut b, t);
    }
    match &s.user_data {
        Some(data) => {
            put_len(&mut b, data.len());
            b.put_slice(data);
        }
        None => b.put_i32(-1),
    }
    if version >= 1 {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (topic, partition) in &s.owned {
            by_topic.entry(topic).or_default().push(*partition);
        }
        put_len(&mut b, by_topic.len());
        for (topic, partitions) in by_topic {
            put_string(&mut b, topic);
            put_len(&mut b, partitions.len());
            for p in partitions {
                b.put_i32(p);
            }
        }
    }
    if version >= 2 {
        b.put_i32(s.generation);
    }
    if version >= 3 {
        match &s.rack {
            Some(rack) => put_string(&mut b, rack),
            None => b.put_i16(-1),
        }
    }
    b.freeze()
}

/// Decodes any version; what is missing or cut short keeps its default.
pub(crate) fn decode(bytes: &Bytes) -> Subscription {
    let mut out = Subscription {
        generation: -1,
        ..Subscription::default()
    };
    let mut r = Cursor(bytes);
    let (Some(version), Some(count)) = (r.i16(), r.i32()) else {
        return out;
    };
    out.topics = (0..count.max(0)).map_while(|_| r.string()).collect();
    if out.topics.len() != usize::try_from(count.max(0)).unwrap_or(0) {
        return out;
    }
    out.user_data = match r.i32() {
        Some(len) if len >= 0 => {
            let Some(data) = take(&mut r, len) else {
                return out;
            };
            Some(data)
        }
        Some(_) => None,
        None => return out,
    };
    if version >= 1 {
        let Some(owned) = owned_partitions(&mut r) else {
            return out;
        };
        out.owned = owned;
    }
    if version >= 2 {
        let Some(generation) = r.i32() else {
            return out;
        };
        out.generation = generation;
    }
    if version >= 3 {
        out.rack = r.string();
    }
    out
}

/// `[(string topic, [i32] partitions)]`; `None` when cut short.
pub(crate) fn owned_partitions(r: &mut Cursor<'_>) -> Option<Vec<TopicPartition>> {
    let topics = r.i32()?;
    let mut out = Vec::new();
    for _ in 0..topics.max(0) {
        let topic = r.string()?;
        let n = r.i32()?;
        for _ in 0..n.max(0) {
            out.push((topic.clone(), r.i32()?));
        }
    }
    Some(out)
}

/// The generation a member that sent no `generation_id` (v0/v1) put in its user data:
/// Java's cooperative-sticky writes exactly one i32; the sticky layout (librdkafka, Java's
/// `sticky`) writes the previous assignment and then the generation.
pub(crate) fn user_data_generation(data: &Bytes) -> Option<i32> {
    let mut r = Cursor(data);
    if data.len() == 4 {
        return r.i32();
    }
    owned_partitions(&mut r)?;
    let generation = r.i32()?;
    r.0.is_empty().then_some(generation)
}

fn take(r: &mut Cursor<'_>, len: i32) -> Option<Bytes> {
    let len = usize::try_from(len).ok()?;
    if r.0.len() < len {
        return None;
    }
    let (head, rest) = r.0.split_at(len);
    r.0 = rest;
    Some(Bytes::copy_from_slice(head))
}

fn put_len(b: &mut BytesMut, n: usize) {
    b.put_i32(i32::try_from(n).unwrap_or(i32::MAX));
}

pub(crate) fn put_string(b: &mut BytesMut, s: &str) {
    // Topic names are at most 249 bytes, so the cut never happens for a real topic.
    let len = s.len().min(i16::MAX as usize);
    b.put_i16(i16::try_from(len).unwrap_or(i16::MAX));
    b.put_slice(&s.as_bytes()[..len]);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn sample() -> Subscription {
        Subscription {
            topics: vec!["orders".into(), "refunds".into()],
            user_data: None,
            owned: vec![
                ("orders".into(), 0),
                ("orders".into(), 3),
                ("refunds".into(), 1),
            ],
            generation: 7,
            rack: None,
        }
    }

    #[test]
    fn every_version_round_trips_its_own_fields() {
        let s = sample();
        let v2 = decode(&encode(&s, 2));
        assert_eq!(v2, s);
        let v1 = decode(&encode(&s, 1));
        assert_eq!((v1.owned.clone(), v1.generation), (s.owned.clone(), -1));
        let v0 = decode(&encode(&s, 0));
        assert_eq!((v0.topics, v0.owned, v0.generation), (s.topics, vec![], -1));
    }

    #[test]
    fn bytes_match_kafkas_schema() {
        // Written out by hand from ConsumerProtocolSubscription.json (v2, not flexible).
        let s = Subscription {
            topics: vec!["t".into()],
            user_data: None,
            owned: vec![("t".into(), 1)],
            generation: 3,
            rack: None,
        };
        let expected: Vec<u8> = [
            &[0, 2][..],               // version
            &[0, 0, 0, 1, 0, 1, b't'], // topics
            &[0xff, 0xff, 0xff, 0xff], // null user data
            &[0, 0, 0, 1, 0, 1, b't'], // one owned topic
            &[0, 0, 0, 1, 0, 0, 0, 1], // partitions [1]
            &[0, 0, 0, 3],             // generation
        ]
        .concat();
        assert_eq!(&encode(&s, 2)[..], &expected[..]);
    }

    #[test]
    fn a_v3_subscription_with_a_rack_is_read_and_cut_input_keeps_what_was_whole() {
        let mut racked = sample();
        racked.rack = Some("rack-a".into());
        let mut v3 = BytesMut::from(&encode(&sample(), 2)[..]);
        v3[1] = 3;
        put_string(&mut v3, "rack-a");
        let v3 = v3.freeze();
        assert_eq!(decode(&v3), racked);
        assert_eq!(encode(&racked, 3), v3);
        assert_eq!(version_for(&racked, false), 3);
        assert_eq!(version_for(&sample(), true), 2);
        assert_eq!(version_for(&sample(), false), 0);
        let whole = encode(&sample(), 2);
        let cut = decode(&whole.slice(..whole.len() - 6));
        assert_eq!(cut.topics, sample().topics);
        assert!(cut.owned.is_empty());
        assert_eq!(cut.generation, -1);
        assert_eq!(
            decode(&Bytes::from_static(&[0, 1, 0x7f, 0xff, 0xff, 0xff]))
                .topics
                .len(),
            0
        );
    }

    #[test]
    fn generation_from_user_data_of_both_layouts() {
        assert_eq!(
            user_data_generation(&Bytes::from_static(&[0, 0, 0, 9])),
            Some(9)
        );
        let mut sticky = BytesMut::new();
        sticky.put_i32(1);
        put_string(&mut sticky, "t");
        sticky.put_i32(1);
        sticky.put_i32(0);
        sticky.put_i32(4);
        assert_eq!(user_data_generation(&sticky.freeze()), Some(4));
        assert_eq!(user_data_generation(&Bytes::from_static(&[1, 2])), None);
    }
}
