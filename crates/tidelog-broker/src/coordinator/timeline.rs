//! A map whose every change is stamped with the log offset of the record that made it,
//! so that it can answer as of the last committed offset (Kafka's timeline data
//! structures, reduced to what a coordinator needs).
//!
//! A coordinator replays a record as soon as it is appended, so the next request
//! already builds on it; but a reader must only see what is committed (the high
//! watermark passed it): an offset served before its record is replicated could vanish
//! with a leader change. The map keeps the latest value of each key and, per change not
//! yet committed, the value it replaced; [`Timeline::get_committed`] looks through those.
//! [`Timeline::commit`] forgets the replaced values once the high watermark passes them,
//! so the history is bounded by the writes in flight.

use std::collections::{BTreeMap, VecDeque};
use std::ops::RangeBounds;

#[derive(Debug)]
pub(crate) struct Timeline<K, V> {
    latest: BTreeMap<K, V>,
    /// (offset of the change, key, value before it), in offset order, for changes at or
    /// above `committed`.
    replaced: VecDeque<(i64, K, Option<V>)>,
    /// Changes at offsets below this are committed.
    committed: i64,
}

impl<K: Ord + Clone, V: Clone> Default for Timeline<K, V> {
    fn default() -> Self {
        Timeline {
            latest: BTreeMap::new(),
            replaced: VecDeque::new(),
            committed: 0,
        }
    }
}

impl<K: Ord + Clone, V: Clone> Timeline<K, V> {
    /// Sets `key` to `value` by the record at `offset`.
    pub(crate) fn insert(&mut self, offset: i64, key: K, value: V) {
        let old = self.latest.insert(key.clone(), value);
        self.remember(offset, key, old);
    }

    /// Removes `key` by the record (a tombstone) at `offset`.
    pub(crate) fn remove(&mut self, offset: i64, key: &K) {
        if let Some(old) = self.latest.remove(key) {
            self.remember(offset, key.clone(), Some(old));
        }
    }

    fn remember(&mut self, offset: i64, key: K, old: Option<V>) {
        if offset >= self.committed {
            self.replaced.push_back((offset, key, old));
        }
    }

    /// Everything below `offset` is committed: its replaced values are forgotten.
    /// Returns the keys whose changes became committed (in log order, maybe repeated).
    pub(crate) fn commit(&mut self, offset: i64) -> Vec<K> {
        self.committed = self.committed.max(offset);
        let mut keys = Vec::new();
        while self
            .replaced
            .front()
            .is_some_and(|(at, _, _)| *at < self.committed)
        {
            if let Some((_, key, _)) = self.replaced.pop_front() {
                keys.push(key);
            }
        }
        keys
    }

    /// The latest value, committed or not: what the next write builds on.
    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.latest.get(key)
    }

    /// The value as of the committed offset: what a reader may be told.
    pub(crate) fn get_committed(&self, key: &K) -> Option<&V> {
        // The first uncommitted change of `key` holds the value it had when committed.
        match self.replaced.iter().find(|(_, k, _)| k == key) {
            Some((_, _, old)) => old.as_ref(),
            None => self.latest.get(key),
        }
    }

    /// The committed entries from `from` on, as long as `within` holds, in key order.
    pub(crate) fn committed_where(&self, from: &K, within: impl Fn(&K) -> bool) -> Vec<(K, V)> {
        let mut out: BTreeMap<K, V> = self
            .latest
            .range(from.clone()..)
            .take_while(|(k, _)| within(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (_, key, _) in &self.replaced {
            if key >= from && within(key) {
                match self.get_committed(key) {
                    Some(v) => out.insert(key.clone(), v.clone()),
                    None => out.remove(key),
                };
            }
        }
        out.into_iter().collect()
    }

    /// The latest entries of `range`, in key order.
    pub(crate) fn range<R: RangeBounds<K>>(&self, range: R) -> impl Iterator<Item = (&K, &V)> {
        self.latest.range(range)
    }

    /// Every latest entry.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.latest.iter()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.latest.len()
    }

    /// Changes not yet committed (bounded by the writes in flight).
    #[cfg(test)]
    pub(crate) fn uncommitted(&self) -> usize {
        self.replaced.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_see_the_committed_value_until_the_change_commits() {
        let mut t: Timeline<&str, i64> = Timeline::default();
        t.insert(0, "a", 1);
        t.commit(1);
        t.insert(1, "a", 2);
        t.insert(2, "b", 9);
        assert_eq!(t.get(&"a"), Some(&2));
        assert_eq!(t.get_committed(&"a"), Some(&1));
        assert_eq!(t.get_committed(&"b"), None);
        assert_eq!(t.committed_where(&"", |_| true), vec![("a", 1)]);
        t.commit(2);
        assert_eq!(t.get_committed(&"a"), Some(&2));
        assert_eq!(t.get_committed(&"b"), None);
        t.commit(3);
        assert_eq!(t.committed_where(&"", |_| true), vec![("a", 2), ("b", 9)]);
        assert_eq!(t.committed_where(&"b", |k| *k == "b"), vec![("b", 9)]);
        assert_eq!(t.uncommitted(), 0);
    }

    #[test]
    fn a_removal_hides_a_key_only_once_committed() {
        let mut t: Timeline<&str, i64> = Timeline::default();
        t.insert(0, "a", 1);
        t.commit(1);
        t.remove(1, &"a");
        t.insert(2, "a", 3);
        t.remove(3, &"a");
        assert_eq!(t.get(&"a"), None);
        assert_eq!(
            t.get_committed(&"a"),
            Some(&1),
            "the oldest pending change holds it"
        );
        t.commit(3);
        assert_eq!(t.get_committed(&"a"), Some(&3));
        t.commit(4);
        assert_eq!(t.get_committed(&"a"), None);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn replay_below_the_committed_offset_keeps_no_history() {
        let mut t: Timeline<i32, i32> = Timeline::default();
        t.commit(100);
        for i in 0..50 {
            t.insert(i64::from(i), i, i);
        }
        assert_eq!(t.uncommitted(), 0);
        assert_eq!(t.get_committed(&7), Some(&7));
    }
}
