//! Share sessions (KIP-932): a member's ShareFetch / ShareAcknowledge requests to one
//! broker form a session, opened with epoch 0, numbered 1, 2, ... after that, and
//! closed with epoch -1. The session holds the partitions the member fetches from
//! here, so a request names only the partitions it adds (and forgets). The cache is
//! bounded (`group.share.max.share.sessions`); a full cache makes room only by evicting
//! a session idle for longer than a share-group session timeout.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::poison::LockTolerant;
use kafka_protocol::error::ResponseError;
use uuid::Uuid;

/// (group, member).
pub(crate) type SessionKey = (String, String);

#[derive(Debug, Clone)]
pub(crate) struct ShareSession {
    /// The epoch the next request must carry.
    pub(crate) next_epoch: i32,
    pub(crate) partitions: BTreeSet<(Uuid, i32)>,
    last_used: Instant,
}

/// What a request did to its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionStep {
    /// The session goes on (or was opened); fetch from these partitions.
    Open(Vec<(Uuid, i32)>),
    /// The session was closed; what it held is to be released.
    Closed(Vec<(Uuid, i32)>),
}

pub(crate) struct SessionCache {
    max: usize,
    sessions: Mutex<HashMap<SessionKey, ShareSession>>,
}

/// Share sessions idle this long may be evicted when the cache is full.
const EVICTABLE_AFTER: Duration = Duration::from_secs(60);

fn next(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl SessionCache {
    pub(crate) fn new(max: usize) -> SessionCache {
        SessionCache {
            max: max.max(1),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Applies a request's session epoch and its added / forgotten partitions. A new
    /// session (epoch 0) replaces the member's old one, whose partitions are returned
    /// in `replaced` for release.
    pub(crate) fn step(
        &self,
        key: &SessionKey,
        epoch: i32,
        add: &[(Uuid, i32)],
        forget: &[(Uuid, i32)],
        now: Instant,
        replaced: &mut Vec<(Uuid, i32)>,
    ) -> Result<SessionStep, ResponseError> {
        let mut sessions = self.sessions.locked();
        match epoch {
            0 => {
                if let Some(old) = sessions.remove(key) {
                    replaced.extend(old.partitions);
                } else if sessions.len() >= self.max {
                    let idle = sessions
                        .iter()
                        .filter(|(_, s)| {
                            now.saturating_duration_since(s.last_used) > EVICTABLE_AFTER
                        })
                        .min_by_key(|(_, s)| s.last_used)
                        .map(|(k, _)| k.clone());
                    match idle {
                        Some(k) => {
                            if let Some(gone) = sessions.remove(&k) {
                                tracing::info!(group = %k.0, member = %k.1, "idle share session evicted");
                                drop(gone);
                            }
                        }
                        None => return Err(ResponseError::ShareSessionLimitReached),
                    }
                }
                let mut partitions: BTreeSet<(Uuid, i32)> = add.iter().copied().collect();
                for f in forget {
                    partitions.remove(f);
                }
                let fetch = partitions.iter().copied().collect();
                sessions.insert(
                    key.clone(),
                    ShareSession {
                        next_epoch: 1,
                        partitions,
                        last_used: now,
                    },
                );
                Ok(SessionStep::Open(fetch))
            }
            -1 => match sessions.remove(key) {
                Some(s) => Ok(SessionStep::Closed(s.partitions.into_iter().collect())),
                None => Err(ResponseError::ShareSessionNotFound),
            },
            e => {
                let s = sessions
                    .get_mut(key)
                    .ok_or(ResponseError::ShareSessionNotFound)?;
                if e != s.next_epoch {
                    return Err(ResponseError::InvalidShareSessionEpoch);
                }
                s.next_epoch = next(e);
                s.last_used = now;
                s.partitions.extend(add.iter().copied());
                for f in forget {
                    s.partitions.remove(f);
                }
                Ok(SessionStep::Open(s.partitions.iter().copied().collect()))
            }
        }
    }

    /// Checks a ShareAcknowledge's epoch (it may not open a session) and moves it on.
    pub(crate) fn acknowledge_step(
        &self,
        key: &SessionKey,
        epoch: i32,
        now: Instant,
    ) -> Result<SessionStep, ResponseError> {
        if epoch == 0 {
            return Err(ResponseError::InvalidShareSessionEpoch);
        }
        self.step(key, epoch, &[], &[], now, &mut Vec::new())
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.sessions.locked().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_follow_the_session() {
        let cache = SessionCache::new(2);
        let now = Instant::now();
        let key = ("g".to_string(), "m".to_string());
        let t = Uuid::from_u128(1);
        let mut replaced = Vec::new();
        assert_eq!(
            cache.step(&key, 1, &[], &[], now, &mut replaced),
            Err(ResponseError::ShareSessionNotFound)
        );
        assert_eq!(
            cache.step(&key, 0, &[(t, 0)], &[], now, &mut replaced),
            Ok(SessionStep::Open(vec![(t, 0)]))
        );
        assert_eq!(
            cache.step(&key, 2, &[], &[], now, &mut replaced),
            Err(ResponseError::InvalidShareSessionEpoch)
        );
        assert_eq!(
            cache.step(&key, 1, &[(t, 1)], &[(t, 0)], now, &mut replaced),
            Ok(SessionStep::Open(vec![(t, 1)]))
        );
        assert_eq!(
            cache.acknowledge_step(&key, 2, now),
            Ok(SessionStep::Open(vec![(t, 1)]))
        );
        assert_eq!(
            cache.step(&key, 0, &[(t, 2)], &[], now, &mut replaced),
            Ok(SessionStep::Open(vec![(t, 2)]))
        );
        assert_eq!(replaced, vec![(t, 1)], "the replaced session's partitions");
        assert_eq!(
            cache.step(&key, -1, &[], &[], now, &mut replaced),
            Ok(SessionStep::Closed(vec![(t, 2)]))
        );
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn a_full_cache_evicts_only_idle_sessions() {
        let cache = SessionCache::new(1);
        let now = Instant::now();
        let mut r = Vec::new();
        let a = ("g".to_string(), "a".to_string());
        let b = ("g".to_string(), "b".to_string());
        cache.step(&a, 0, &[], &[], now, &mut r).unwrap();
        assert_eq!(
            cache.step(&b, 0, &[], &[], now, &mut r),
            Err(ResponseError::ShareSessionLimitReached)
        );
        let later = now + EVICTABLE_AFTER + Duration::from_secs(1);
        assert!(cache.step(&b, 0, &[], &[], later, &mut r).is_ok());
        assert_eq!(
            cache.step(&a, 1, &[], &[], later, &mut r),
            Err(ResponseError::ShareSessionNotFound)
        );
    }
}
