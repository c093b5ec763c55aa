//! What a consumer group subscribes to: topic names and broker-side regular
//! expressions resolved against the image, the hash that tells when their metadata
//! changed, and the group's assignor.

use std::collections::{BTreeMap, BTreeSet};

use regex_automata::meta::Regex;
use uuid::Uuid;

use super::heartbeat::Writer;
use super::{
    assignor, ConsumerGroup, ConsumerKey, ConsumerValue, MemberMetadata, ResolvedRegex, TopicsView,
};
use crate::group::GroupConfig;

/// Longest subscription regex accepted (its compiled size is bounded too).
const MAX_REGEX_BYTES: usize = 1024;

/// A full-match regex of Kafka's RE2J subset (what `regex-automata` accepts: no
/// look-around, no back-references).
pub(crate) fn compile_regex(pattern: &str) -> Result<Regex, String> {
    if pattern.len() > MAX_REGEX_BYTES {
        return Err(format!("longer than {MAX_REGEX_BYTES} bytes"));
    }
    Regex::builder()
        .configure(Regex::config().nfa_size_limit(Some(1 << 20)))
        .build(&format!("^(?:{pattern})$"))
        .map_err(|e| e.to_string())
}

/// The topics `meta` subscribes to that exist: by name, and by its regex as the group
/// resolved it (see [`refresh_regexes`]).
pub(crate) fn member_topics(
    meta: &MemberMetadata,
    regexes: &BTreeMap<String, ResolvedRegex>,
    topics: &TopicsView,
) -> BTreeSet<Uuid> {
    let resolved = meta
        .subscribed_topic_regex
        .as_ref()
        .and_then(|regex| regexes.get(regex))
        .into_iter()
        .flat_map(|r| r.topics.iter());
    meta.subscribed_topic_names
        .iter()
        .chain(resolved)
        .filter_map(|name| topics.by_name.get(name).map(|(id, _)| *id))
        .collect()
}

/// Kafka's resolution of subscription regexes (KIP-848, with KAFKA-18813's check): a
/// regex a member subscribes with is resolved when it is new to the group, and again
/// once the metadata image has moved past the one it was resolved at, to the
/// non-internal topics it matches that the principal of the heartbeat resolving it may
/// describe. The result is a record, so every member of the group, a later coordinator
/// and a replay see the same topics whoever heartbeats next. A regex no member uses any
/// more is deleted.
pub(super) fn refresh_regexes(w: &mut Writer<'_>, topics: &TopicsView) {
    let in_use: BTreeSet<String> = w
        .group
        .members
        .values()
        .filter_map(|m| m.metadata.subscribed_topic_regex.clone())
        .collect();
    let group = w.group.id.clone();
    let unused: Vec<String> = w
        .group
        .regexes
        .keys()
        .filter(|regex| !in_use.contains(*regex))
        .cloned()
        .collect();
    for regex in unused {
        let group = group.clone();
        w.emit(ConsumerKey::Regex { group, regex }, None);
    }
    for regex in in_use {
        let stored = w.group.regexes.get(&regex);
        if stored.is_some_and(|r| r.version >= topics.version) {
            continue;
        }
        // Checked when a member sent it; one that no longer compiles matches nothing.
        let matched: BTreeSet<String> = match compile_regex(&regex) {
            Ok(compiled) => topics
                .by_name
                .keys()
                .filter(|name| !name.starts_with("__") && compiled.is_match(name.as_str()))
                .filter(|name| topics.describable.allows(name))
                .cloned()
                .collect(),
            Err(_) => BTreeSet::new(),
        };
        // Same topics at a newer image: nothing to write (the next heartbeat looks again).
        if stored.is_some_and(|r| r.topics == matched) {
            continue;
        }
        let resolved = ResolvedRegex {
            topics: matched,
            version: topics.version,
            timestamp_ms: topics.taken_ms,
        };
        let group = group.clone();
        w.emit(
            ConsumerKey::Regex { group, regex },
            Some(ConsumerValue::Regex(resolved)),
        );
    }
}

/// Every topic the group subscribes to (id -> partition count) and a hash of their
/// metadata: when a topic appears, goes or grows, the hash changes.
pub(crate) fn group_topics(
    group: &ConsumerGroup,
    topics: &TopicsView,
) -> (BTreeMap<Uuid, i32>, i64) {
    let mut subscribed = BTreeMap::new();
    for m in group.members.values() {
        for id in member_topics(&m.metadata, &group.regexes, topics) {
            if let Some(name) = topics.names.get(&id) {
                if let Some((_, count)) = topics.by_name.get(name) {
                    subscribed.insert(id, *count);
                }
            }
        }
    }
    // FNV-1a over (id, partition count) in id order: stable across builds.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (id, count) in &subscribed {
        for b in id.as_bytes().iter().chain(&count.to_be_bytes()) {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    (subscribed, hash as i64)
}

/// The assignor of the group: the one most members ask for, else the first configured.
pub(crate) fn group_assignor(group: &ConsumerGroup, config: &GroupConfig) -> String {
    let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
    for m in group.members.values() {
        if let Some(a) = m.metadata.server_assignor.as_deref() {
            *votes.entry(a).or_default() += 1;
        }
    }
    votes
        .into_iter()
        .max_by_key(|(name, n)| (*n, std::cmp::Reverse(*name)))
        .map(|(name, _)| name.to_string())
        .or_else(|| config.consumer_assignors.first().cloned())
        .unwrap_or_else(|| assignor::UNIFORM.to_string())
}
