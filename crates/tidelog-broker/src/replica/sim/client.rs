//! The producing client: acks=all writes of unique values to whichever node its
//! metadata names leader, up to a few in flight; what it is told was written is the
//! history the checks hold the cluster to.

use std::collections::BTreeMap;

use tidelog_controller::MetadataImage;

use super::controller::TOPIC_ID;
use super::net::{Addr, Msg, Net};
use super::rng::Rng;

const MAX_IN_FLIGHT: usize = 5;
const METADATA_MS: i64 = 200;
const REQUEST_TIMEOUT_MS: i64 = 8_000;

pub(super) struct SimClient {
    version: usize,
    /// When the next produce is due, in microseconds.
    next_send_us: i64,
    next_metadata: i64,
    next_id: u64,
    next_value: u64,
    in_flight: BTreeMap<u64, (Vec<String>, i64)>,
    /// offset -> value of every acknowledged record (the latest, where an offset was
    /// acknowledged twice).
    pub(super) acked: BTreeMap<i64, String>,
    /// Every acknowledgement, in order.
    pub(super) acks: Vec<(i64, String)>,
    /// Offsets acknowledged twice with different values (an unclean election hands
    /// out offsets again).
    pub(super) renumbered: Vec<(i64, String, String)>,
    pub(super) sends: u64,
    pub(super) refusals: u64,
}

impl SimClient {
    pub(super) fn new() -> Self {
        SimClient {
            version: 0,
            next_send_us: 0,
            next_metadata: 0,
            next_id: 0,
            next_value: 0,
            in_flight: BTreeMap::new(),
            acked: BTreeMap::new(),
            acks: Vec::new(),
            renumbered: Vec::new(),
            sends: 0,
            refusals: 0,
        }
    }

    /// Sends when due: one produce of 1..=`batch` values every `every_us` on average
    /// (a send the tick delayed does not delay the next; a stall is not made up).
    pub(super) fn tick(
        &mut self,
        now: i64,
        every_us: i64,
        batch: i64,
        images: &[MetadataImage],
        net: &mut Net,
        rng: &mut Rng,
    ) {
        self.in_flight
            .retain(|_, (_, sent)| now - *sent < REQUEST_TIMEOUT_MS);
        if now >= self.next_metadata {
            self.next_metadata = now + METADATA_MS;
            let have = Some(self.version);
            net.send(
                rng,
                now,
                Addr::Client,
                Addr::Controller,
                Msg::MetadataFetch { have },
            );
        }
        let now_us = now * 1_000;
        if now_us < self.next_send_us || self.in_flight.len() >= MAX_IN_FLIGHT {
            return;
        }
        self.next_send_us = (self.next_send_us + every_us).max(now_us - every_us);
        let leader = images
            .get(self.version)
            .and_then(|i| i.topic_by_id(&TOPIC_ID))
            .and_then(|t| t.partitions.get(&0))
            .map_or(-1, |p| p.leader);
        if leader < 0 {
            return;
        }
        let count = rng.range(1, batch.max(1));
        let values: Vec<String> = (0..count)
            .map(|_| {
                self.next_value += 1;
                format!("v{}", self.next_value)
            })
            .collect();
        self.next_id += 1;
        let id = self.next_id;
        self.in_flight.insert(id, (values.clone(), now));
        self.sends += 1;
        net.send(
            rng,
            now,
            Addr::Client,
            Addr::Node(leader),
            Msg::Produce { id, values },
        );
    }

    pub(super) fn on_message(&mut self, msg: Msg) {
        match msg {
            Msg::Metadata { version } => self.version = self.version.max(version),
            Msg::ProduceReply { id, result } => {
                let Some((values, _)) = self.in_flight.remove(&id) else {
                    return;
                };
                match result {
                    Ok(base) => {
                        for (offset, value) in (base..).zip(values) {
                            self.acks.push((offset, value.clone()));
                            if let Some(before) = self.acked.insert(offset, value.clone()) {
                                if before != value {
                                    self.renumbered.push((offset, before, value));
                                }
                            }
                        }
                    }
                    Err(_) => self.refusals += 1,
                }
            }
            _ => {}
        }
    }
}
