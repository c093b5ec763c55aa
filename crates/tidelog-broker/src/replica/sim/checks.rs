//! The invariants, checked while the simulation runs and once it has settled.

use std::collections::BTreeMap;

use bytes::Bytes;
use tidelog_controller::MetadataImage;
use tidelog_records::LogRecords;

use super::controller::TOPIC_ID;
use super::node::SimNode;
use crate::replica::partition::Partition;
use crate::replica::state::Role;

#[derive(Default)]
pub(super) struct Checks {
    /// leader epoch -> the node that led in it.
    epoch_leaders: BTreeMap<i32, i32>,
    /// (node, start, leader epoch) -> the highest HW it published as leader.
    leader_hw: BTreeMap<(i32, u32, i32), i64>,
    images_checked: usize,
    pub(super) violations: Vec<String>,
}

/// A log's records from its start: (offset -> value), its high watermark and its end.
pub(super) struct LogView {
    pub(super) records: BTreeMap<i64, String>,
    pub(super) high_watermark: i64,
    pub(super) end: i64,
}

pub(super) fn view(p: &Partition) -> LogView {
    let offsets = p.offsets().expect("offsets");
    let mut records = BTreeMap::new();
    let mut offset = offsets.log_start;
    let mut end = offset;
    loop {
        let read = p.read_for_follower(offset, 1 << 20).expect("read");
        let Some(slice) = read.slice else { break };
        let mut walked = LogRecords::new(Bytes::from(slice.read_to_vec().expect("read")));
        for record in walked.by_ref() {
            let record = record.expect("a stored record parses");
            let value = record.value.map(|v| v.to_vec()).unwrap_or_default();
            records.insert(record.offset, String::from_utf8_lossy(&value).into_owned());
        }
        match walked.next_offset() {
            Some(next) if next > offset => {
                offset = next;
                end = next;
            }
            _ => break,
        }
    }
    LogView {
        records,
        high_watermark: offsets.high_watermark,
        end,
    }
}

impl Checks {
    fn fail(&mut self, now: i64, what: String) {
        if self.violations.len() < 20 {
            self.violations.push(format!("t={now} ms: {what}"));
        }
    }

    /// Cheap checks, after every step: the image's partition is well formed, one
    /// leader per leader epoch, a leader's high watermark never goes back.
    pub(super) fn step(&mut self, now: i64, nodes: &[SimNode], images: &[MetadataImage]) {
        for (version, image) in images.iter().enumerate().skip(self.images_checked) {
            let Some(p) = image
                .topic_by_id(&TOPIC_ID)
                .and_then(|t| t.partitions.get(&0))
            else {
                continue;
            };
            if p.isr.is_empty() || p.isr.iter().any(|r| !p.replicas.contains(r)) {
                self.fail(
                    now,
                    format!(
                        "image v{version}: ISR {:?} of replicas {:?}",
                        p.isr, p.replicas
                    ),
                );
            }
            if p.leader >= 0 && !p.isr.contains(&p.leader) {
                self.fail(
                    now,
                    format!(
                        "image v{version}: leader {} outside ISR {:?}",
                        p.leader, p.isr
                    ),
                );
            }
        }
        self.images_checked = images.len();
        for node in nodes {
            let Some(p) = &node.part else { continue };
            if p.role() != Role::Leader {
                continue;
            }
            let epoch = p.leader_epoch();
            let first = *self.epoch_leaders.entry(epoch).or_insert(node.id);
            if first != node.id {
                self.fail(
                    now,
                    format!("nodes {first} and {} both led epoch {epoch}", node.id),
                );
            }
            let hw = p.offsets().expect("offsets").high_watermark;
            let highest = self
                .leader_hw
                .entry((node.id, node.starts, epoch))
                .or_insert(hw);
            let before = *highest;
            *highest = before.max(hw);
            if hw < before {
                self.fail(
                    now,
                    format!(
                        "node {} (leader, epoch {epoch}): HW {before} -> {hw}",
                        node.id
                    ),
                );
            }
        }
    }

    /// Data checks (clean elections only): replicas agree below their high
    /// watermarks, and the leader the latest image names, once it leads in that
    /// image's epoch, holds every acknowledged record.
    pub(super) fn data(
        &mut self,
        now: i64,
        nodes: &[SimNode],
        image: &MetadataImage,
        acked: &BTreeMap<i64, String>,
    ) {
        let current = image
            .topic_by_id(&TOPIC_ID)
            .and_then(|t| t.partitions.get(&0))
            .map(|p| (p.leader, p.leader_epoch));
        let views: Vec<(i32, bool, LogView)> = nodes
            .iter()
            .filter_map(|n| {
                let p = n.part.as_ref()?;
                let leads = p.role() == Role::Leader && current == Some((n.id, p.leader_epoch()));
                Some((n.id, leads, view(p)))
            })
            .collect();
        for (i, (a, _, va)) in views.iter().enumerate() {
            for (b, _, vb) in &views[i + 1..] {
                let below = va.high_watermark.min(vb.high_watermark);
                let differs = va
                    .records
                    .range(..below)
                    .find(|(o, v)| vb.records.get(o).is_some_and(|w| w != *v));
                if let Some((offset, value)) = differs {
                    let other = vb.records.get(offset).cloned().unwrap_or_default();
                    self.fail(now, format!("offset {offset} below both HWs: {value} on node {a}, {other} on node {b}"));
                }
            }
        }
        for (id, leads, v) in &views {
            if !leads {
                continue;
            }
            let missing = acked
                .iter()
                .find(|(o, value)| v.records.get(o) != Some(value));
            if let Some((offset, value)) = missing {
                let found = v.records.get(offset).cloned();
                self.fail(
                    now,
                    format!("leader {id} lacks acknowledged {value} at {offset} (has {found:?})"),
                );
            }
        }
    }
}
