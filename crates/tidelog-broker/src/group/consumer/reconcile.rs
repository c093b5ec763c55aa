//! One member's next step towards its target assignment (Kafka's
//! `CurrentAssignmentBuilder`): first it revokes what it owns and may no longer keep,
//! staying at its epoch; only then does it move to the target epoch and get new
//! partitions, and of those only the ones no other member still owns. So a partition
//! never has two owners in one epoch.

use uuid::Uuid;

use super::{Assignment, CurrentAssignment, MemberState};

/// The member's next current assignment. `owned` is what the member says it owns
/// (`None`: it did not say); `owned_elsewhere` tells whether another member still owns
/// (holds or has yet to revoke) a partition.
pub(crate) fn reconcile(
    current: &CurrentAssignment,
    target: &Assignment,
    target_epoch: i32,
    owned: Option<&Assignment>,
    owned_elsewhere: impl Fn(Uuid, i32) -> bool,
) -> CurrentAssignment {
    match current.state {
        MemberState::Stable if current.member_epoch == target_epoch => current.clone(),
        MemberState::UnrevokedPartitions if still_owns_any(owned, &current.pending_revocation) => {
            current.clone()
        }
        _ => next(current, target, target_epoch, owned, owned_elsewhere),
    }
}

/// Whether the member may still own some of `partitions` (it did not say otherwise).
fn still_owns_any(owned: Option<&Assignment>, partitions: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    partitions.iter().any(|(topic, ps)| {
        owned
            .get(topic)
            .is_some_and(|o| ps.iter().any(|p| o.contains(p)))
    })
}

fn next(
    current: &CurrentAssignment,
    target: &Assignment,
    target_epoch: i32,
    owned: Option<&Assignment>,
    owned_elsewhere: impl Fn(Uuid, i32) -> bool,
) -> CurrentAssignment {
    let mut keep = Assignment::new();
    let mut revoke = Assignment::new();
    let mut add = Assignment::new();
    let mut unreleased = false;
    let topics = current.assigned.keys().chain(target.keys());
    for topic in topics.collect::<std::collections::BTreeSet<_>>() {
        let empty = Default::default();
        let have = current.assigned.get(topic).unwrap_or(&empty);
        let want = target.get(topic).unwrap_or(&empty);
        let kept: std::collections::BTreeSet<i32> = have.intersection(want).copied().collect();
        let gone: std::collections::BTreeSet<i32> = have.difference(want).copied().collect();
        let mut new = std::collections::BTreeSet::new();
        for p in want.difference(have) {
            if owned_elsewhere(*topic, *p) {
                unreleased = true;
            } else {
                new.insert(*p);
            }
        }
        if !kept.is_empty() {
            keep.insert(*topic, kept);
        }
        if !gone.is_empty() {
            revoke.insert(*topic, gone);
        }
        if !new.is_empty() {
            add.insert(*topic, new);
        }
    }
    if !revoke.is_empty() && still_owns_any(owned, &revoke) {
        return CurrentAssignment {
            member_epoch: current.member_epoch,
            previous_member_epoch: current.previous_member_epoch,
            state: MemberState::UnrevokedPartitions,
            assigned: keep,
            pending_revocation: revoke,
        };
    }
    for (topic, partitions) in add {
        keep.entry(topic).or_default().extend(partitions);
    }
    let previous_member_epoch = if current.member_epoch == target_epoch {
        current.previous_member_epoch
    } else {
        current.member_epoch
    };
    CurrentAssignment {
        member_epoch: target_epoch,
        previous_member_epoch,
        state: if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        },
        assigned: keep,
        pending_revocation: Assignment::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(topic: Uuid, partitions: &[i32]) -> Assignment {
        [(topic, partitions.iter().copied().collect())].into()
    }

    #[test]
    fn revokes_before_moving_to_the_new_epoch() {
        let t = Uuid::from_u128(1);
        let current = CurrentAssignment {
            member_epoch: 1,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            assigned: a(t, &[0, 1, 2, 3]),
            pending_revocation: Assignment::new(),
        };
        let target = a(t, &[0, 1, 2]);
        let step = reconcile(&current, &target, 2, None, |_, _| false);
        assert_eq!(step.state, MemberState::UnrevokedPartitions);
        assert_eq!(step.member_epoch, 1);
        assert_eq!(step.assigned, a(t, &[0, 1, 2]));
        assert_eq!(step.pending_revocation, a(t, &[3]));
        // Still owning partition 3: nothing changes.
        let owned = a(t, &[0, 1, 2, 3]);
        assert_eq!(
            reconcile(&step, &target, 2, Some(&owned), |_, _| false),
            step
        );
        // Revoked: the member moves to epoch 2.
        let owned = a(t, &[0, 1, 2]);
        let done = reconcile(&step, &target, 2, Some(&owned), |_, _| false);
        assert_eq!(done.state, MemberState::Stable);
        assert_eq!((done.member_epoch, done.previous_member_epoch), (2, 1));
        assert_eq!(done.assigned, target);
        assert!(done.pending_revocation.is_empty());
    }

    #[test]
    fn waits_for_partitions_another_member_still_owns() {
        let t = Uuid::from_u128(1);
        let current = CurrentAssignment::default();
        let target = a(t, &[3, 4]);
        let step = reconcile(&current, &target, 2, Some(&Assignment::new()), |_, p| {
            p == 3
        });
        assert_eq!(step.state, MemberState::UnreleasedPartitions);
        assert_eq!(step.member_epoch, 2);
        assert_eq!(step.assigned, a(t, &[4]));
        // Released: the member gets it in the same epoch.
        let later = reconcile(&step, &target, 2, None, |_, _| false);
        assert_eq!(later.state, MemberState::Stable);
        assert_eq!(later.assigned, target);
        assert_eq!(later.member_epoch, 2);
    }
}
