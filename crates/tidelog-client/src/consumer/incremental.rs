//! A consumer-protocol (KIP-848) member's side of `poll`: start the heartbeat task
//! (`kip848.rs`), and reconcile each assignment the coordinator sent, incrementally:
//! the partitions that left are revoked first (committed when automatic, the listener
//! told), then the new ones are assigned, and only then is the new ownership reported,
//! so that the coordinator never sees a partition owned twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::coordinator::{self, Command, Shared};
use super::kip848::{self, IdPartition, Membership, Target};
use super::{Consumer, GroupState};
use crate::error::{ClientError, Result};
use crate::partition_admin::TopicPartition;

/// What one reconciliation step changes.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Owned now, not in the target: revoked first.
    pub(crate) revoke: Vec<TopicPartition>,
    /// In the target, not owned yet: assigned after the revocation.
    pub(crate) assign: Vec<TopicPartition>,
}

/// The step from `current` to `target`; partitions in both are kept untouched.
pub(crate) fn plan(current: &BTreeSet<TopicPartition>, target: &BTreeSet<TopicPartition>) -> Plan {
    Plan {
        revoke: current.difference(target).cloned().collect(),
        assign: target.difference(current).cloned().collect(),
    }
}

/// Names the target's partitions by topic name. Returns the named partitions and the
/// ids they came from; partitions of topics not (yet) in the metadata are left out, to
/// be reconciled once the metadata knows them.
pub(crate) fn resolve(
    target: &BTreeSet<IdPartition>,
    names: &BTreeMap<Uuid, String>,
) -> (BTreeSet<TopicPartition>, BTreeSet<IdPartition>) {
    let mut named = BTreeSet::new();
    let mut ids = BTreeSet::new();
    for (id, partition) in target {
        if let Some(name) = names.get(id) {
            named.insert((name.clone(), *partition));
            ids.insert((*id, *partition));
        }
    }
    (named, ids)
}

impl Consumer {
    /// The consumer-protocol counterpart of the classic join: never blocks on the
    /// coordinator; it applies what the heartbeat task learnt since the last poll.
    pub(super) async fn ensure_consumer_group(&mut self, group_id: &str) -> Result<()> {
        if self.group.is_none() {
            self.start_membership(group_id);
        }
        let Some(state) = self.group.as_ref().and_then(|g| g.kip.clone()) else {
            return Ok(());
        };
        state.set_topics(&self.subscription);
        state.set_regex(self.pattern.as_deref());
        if let Some((error, message)) = state.take_failure() {
            return Err(ClientError::Broker {
                context: format!("consumer group heartbeat to {group_id}"),
                error,
                message,
            });
        }
        if state.take_lost() {
            self.lose_all();
        }
        if let Some(target) = state.take_target() {
            let began = Instant::now();
            self.reconcile(&state, target).await?;
            self.rebalance_time = self.rebalance_time.max(began.elapsed());
        }
        if let Some(g) = self.group.as_mut() {
            let (member_id, epoch) = state.identity();
            g.member_id = member_id;
            g.generation = if epoch > 0 { epoch } else { -1 };
        }
        Ok(())
    }

    fn start_membership(&mut self, group_id: &str) {
        let shared = Shared::new();
        let state = Membership::new();
        let (commands, receiver) = mpsc::channel(coordinator::COMMAND_QUEUE);
        let settings = kip848::Settings {
            group: group_id.to_owned(),
            instance_id: self.config.group_instance_id.clone(),
            rebalance_timeout: self.config.max_poll_interval,
            assignor: self.config.group_remote_assignor.clone(),
            rack: self.config.client_rack.clone(),
            heartbeat_interval: self.config.heartbeat_interval,
            max_poll_interval: self.config.max_poll_interval,
            client: self.client.config().clone(),
        };
        state.set_topics(&self.subscription);
        state.set_regex(self.pattern.as_deref());
        shared.polled();
        let task = tokio::spawn(kip848::run(
            settings,
            shared.clone(),
            state.clone(),
            receiver,
        ));
        self.group = Some(GroupState {
            conn: None,
            member_id: state.identity().0,
            generation: -1,
            shared,
            commands,
            task,
            pending: None,
            kip: Some(state),
        });
    }

    /// The membership is gone: its partitions may already be someone else's, so they
    /// are dropped without a commit.
    pub(super) fn lose_all(&mut self) {
        if self.assigned.is_empty() {
            return;
        }
        let lost = self.assignment();
        tracing::info!(partitions = ?lost, "lost the group membership; dropping the partitions");
        if let Some(listener) = self.listener.as_mut() {
            listener.on_lost(&lost);
        }
        self.assigned.clear();
        self.paused.clear();
    }

    /// Moves the assignment to `target`: revoke, then assign, then report ownership.
    async fn reconcile(&mut self, state: &Arc<Membership>, target: Target) -> Result<()> {
        let names = self.topic_names(&target.partitions).await;
        let (named, ids) = resolve(&target.partitions, &names);
        let current: BTreeSet<TopicPartition> = self.assigned.keys().cloned().collect();
        let step = plan(&current, &named);
        if !step.revoke.is_empty() {
            if self.config.enable_auto_commit {
                let offsets: Vec<(TopicPartition, i64)> = self
                    .positions()
                    .into_iter()
                    .filter(|(tp, _)| step.revoke.contains(tp))
                    .collect();
                if let Err(e) = self.commit_offsets_sync(&offsets).await {
                    tracing::warn!(error = %e, "commit before the revocation failed; \
                        the next owner re-reads from the last committed offsets");
                }
            }
            if let Some(listener) = self.listener.as_mut() {
                listener.on_revoked(&step.revoke);
            }
            for tp in &step.revoke {
                self.assigned.remove(tp);
                self.paused.remove(tp);
            }
        }
        if !step.assign.is_empty() {
            for tp in &step.assign {
                self.assigned.entry(tp.clone()).or_default();
            }
            self.resolve_positions().await?;
            tracing::info!(assigned = ?step.assign, revoked = ?step.revoke,
                epoch = state.identity().1, "reconciled the group assignment");
            if let Some(listener) = self.listener.as_mut() {
                listener.on_assigned(&step.assign);
            }
        }
        let complete = ids.len() == target.partitions.len();
        let join = target.join;
        if !complete {
            state.retry_target(target);
        }
        state.set_owned(join, ids);
        Ok(())
    }

    /// Committed offsets of `partitions` fetched as this consumer-protocol member at its
    /// epoch (through the heartbeat task); `None` for a classic member.
    pub(super) async fn member_committed(
        &mut self,
        partitions: &[TopicPartition],
    ) -> Option<Result<BTreeMap<TopicPartition, i64>>> {
        let g = self.group.as_ref().filter(|g| g.kip.is_some())?;
        let (reply, answer) = oneshot::channel();
        let command = Command::FetchOffsets {
            partitions: partitions.to_vec(),
            reply,
        };
        if g.commands.send(command).await.is_err() {
            return Some(Err(ClientError::Protocol(
                "the group task has stopped".into(),
            )));
        }
        Some(
            answer.await.unwrap_or_else(|_| {
                Err(ClientError::Protocol("the group task has stopped".into()))
            }),
        )
    }

    /// Topic id -> name for the target's topics, from the cached metadata, refreshed for
    /// the subscription when an id is unknown.
    async fn topic_names(&mut self, target: &BTreeSet<IdPartition>) -> BTreeMap<Uuid, String> {
        let known = |client: &crate::client::Client| -> BTreeMap<Uuid, String> {
            client
                .cached_metadata()
                .topics
                .values()
                .map(|t| (t.topic_id, t.name.clone()))
                .collect()
        };
        let names = known(&self.client);
        if target.iter().all(|(id, _)| names.contains_key(id)) {
            return names;
        }
        let topics: Vec<&str> = self.subscription.iter().map(String::as_str).collect();
        // A regex subscription's topics are whatever the broker matched: ask for all.
        let wanted = self.pattern.is_none().then_some(topics.as_slice());
        if let Err(e) = self.client.refresh_metadata(wanted, false).await {
            tracing::debug!(error = %e, "metadata refresh for the assignment failed");
        }
        known(&self.client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tps(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
        list.iter().map(|(t, p)| ((*t).to_string(), *p)).collect()
    }

    #[test]
    fn revokes_what_left_and_assigns_what_is_new_keeping_the_rest() {
        let current = tps(&[("a", 0), ("a", 1), ("b", 0)]);
        let target = tps(&[("a", 1), ("b", 0), ("b", 1)]);
        let step = plan(&current, &target);
        assert_eq!(step.revoke, vec![("a".to_string(), 0)]);
        assert_eq!(step.assign, vec![("b".to_string(), 1)]);
    }

    #[test]
    fn same_assignment_changes_nothing_and_empty_target_revokes_all() {
        let current = tps(&[("a", 0), ("a", 1)]);
        assert_eq!(plan(&current, &current), Plan::default());
        let step = plan(&current, &BTreeSet::new());
        assert_eq!(step.revoke.len(), 2);
        assert!(step.assign.is_empty());
        let step = plan(&BTreeSet::new(), &current);
        assert!(step.revoke.is_empty());
        assert_eq!(step.assign.len(), 2);
    }

    #[test]
    fn unknown_topic_ids_wait_for_the_metadata() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let names = BTreeMap::from([(a, "a".to_string())]);
        let target = BTreeSet::from([(a, 0), (a, 3), (b, 1)]);
        let (named, ids) = resolve(&target, &names);
        assert_eq!(named, tps(&[("a", 0), ("a", 3)]));
        assert_eq!(ids, BTreeSet::from([(a, 0), (a, 3)]));
    }
}
