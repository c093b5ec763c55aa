//! What a consumer group subscribes to: topic names and broker-side regular
//! expressions resolved against the image, the hash that tells when their metadata
//! changed, and the group's assignor.

use std::collections::{BTreeMap, BTreeSet};

use regex_automata::meta::Regex;
use uuid::Uuid;

use super::{assignor, ConsumerGroup, MemberMetadata, TopicsView};
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

/// The topics `meta` subscribes to that exist: by name, and by regex among the
/// non-internal topics.
pub(crate) fn member_topics(meta: &MemberMetadata, topics: &TopicsView) -> BTreeSet<Uuid> {
    let mut out: BTreeSet<Uuid> = meta
        .subscribed_topic_names
        .iter()
        .filter_map(|name| topics.by_name.get(name).map(|(id, _)| *id))
        .collect();
    if let Some(re) = meta
        .subscribed_topic_regex
        .as_deref()
        .and_then(|p| compile_regex(p).ok())
    {
        for (name, (id, _)) in &topics.by_name {
            if !name.starts_with("__") && re.is_match(name.as_str()) {
                out.insert(*id);
            }
        }
    }
    out
}

/// Every topic the group subscribes to (id -> partition count) and a hash of their
/// metadata: when a topic appears, goes or grows, the hash changes.
pub(crate) fn group_topics(
    group: &ConsumerGroup,
    topics: &TopicsView,
) -> (BTreeMap<Uuid, i32>, i64) {
    let mut subscribed = BTreeMap::new();
    for m in group.members.values() {
        for id in member_topics(&m.metadata, topics) {
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
