//! Settings of a [`super::Producer`], by field or by their Kafka names.

use std::time::Duration;

use kafka_protocol::records::Compression;

use crate::error::{ClientError, Result};

/// How many replicas must have a batch before the broker answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// Fire and forget: the broker sends no response, offsets are unknown (-1).
    None,
    /// The leader appended it.
    Leader,
    /// Every in-sync replica has it.
    All,
}

impl Acks {
    pub(super) fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

impl std::str::FromStr for Acks {
    type Err = ClientError;
    fn from_str(s: &str) -> Result<Acks> {
        match s {
            "0" => Ok(Acks::None),
            "1" => Ok(Acks::Leader),
            "all" | "-1" => Ok(Acks::All),
            other => Err(ClientError::InvalidArgument(format!(
                "acks must be 0, 1 or all, not {other:?}"
            ))),
        }
    }
}

/// Settings of a [`super::Producer`].
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// Acknowledgement level (`acks`).
    pub acks: Acks,
    /// Codec of every batch (`compression.type`).
    pub compression: Compression,
    /// Records of one partition are split into batches of about this many bytes
    /// (`batch.size`).
    pub max_batch_bytes: usize,
    /// The broker-side `timeout_ms` of a Produce request, the acks=all wait
    /// (`request.timeout.ms`).
    pub produce_timeout: Duration,
    /// Ask the broker to auto-create unknown topics (when it allows that).
    pub allow_auto_create: bool,
    /// Most bytes of records the producer holds until the broker acknowledges them
    /// (`buffer.memory`, Kafka's 32 MiB). Each record sent since the last flush also
    /// holds a few bytes for its result until that flush.
    pub buffer_memory: usize,
    /// How long `send` waits for room in `buffer.memory` (and for the topic's metadata)
    /// before it fails (`max.block.ms`, Kafka's 60 s).
    pub max_block: Duration,
    /// Idempotent producing (`enable.idempotence`, on by default as in Kafka 3+): every
    /// batch carries the producer id, epoch and per-partition sequence, so a retried
    /// batch that was already written is not written again. Needs `acks=all`.
    pub enable_idempotence: bool,
    /// Makes the producer transactional (`transactional.id`): it must call
    /// `init_transactions` first and send only inside transactions. Needs idempotence.
    pub transactional_id: Option<String>,
    /// How long the coordinator lets a transaction stay open before it aborts it
    /// (`transaction.timeout.ms`, Kafka's 60 s).
    pub transaction_timeout: Duration,
    /// `linger.ms` (5, Kafka 4's default): how long a [`crate::BackgroundProducer`]
    /// lets a partition's batch wait for more records before it sends it. The plain
    /// [`crate::Producer`] sends on `flush` and does not use it.
    pub linger: Duration,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            acks: Acks::All,
            compression: Compression::None,
            max_batch_bytes: 1024 * 1024,
            produce_timeout: Duration::from_secs(30),
            allow_auto_create: true,
            buffer_memory: 32 * 1024 * 1024,
            max_block: Duration::from_secs(60),
            enable_idempotence: true,
            transactional_id: None,
            transaction_timeout: Duration::from_secs(60),
            linger: Duration::from_millis(5),
        }
    }
}

impl ProducerConfig {
    /// Sets one setting by its Kafka producer name (`acks`, `compression.type`,
    /// `batch.size`, `request.timeout.ms`, `buffer.memory`, `max.block.ms`,
    /// `enable.idempotence`, `transactional.id`, `transaction.timeout.ms`). Combinations are checked when the producer is used
    /// ([`ProducerConfig::validate`]), so settings can be given in any order.
    pub fn set(&mut self, name: &str, value: &str) -> Result<&mut Self> {
        let bad = || ClientError::InvalidArgument(format!("{name}={value:?} is not valid"));
        let bytes = || -> Result<usize> {
            value
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(bad)
        };
        let ms = || -> Result<Duration> {
            value
                .trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| bad())
        };
        match name {
            "acks" => self.acks = value.trim().parse()?,
            "compression.type" => {
                self.compression = match value.trim() {
                    "none" => Compression::None,
                    "gzip" => Compression::Gzip,
                    "snappy" => Compression::Snappy,
                    "lz4" => Compression::Lz4,
                    "zstd" => Compression::Zstd,
                    _ => return Err(bad()),
                }
            }
            "batch.size" => self.max_batch_bytes = bytes()?,
            "request.timeout.ms" => self.produce_timeout = ms()?,
            "linger.ms" => self.linger = ms()?,
            "buffer.memory" => self.buffer_memory = bytes()?,
            "max.block.ms" => self.max_block = ms()?,
            "enable.idempotence" => {
                self.enable_idempotence = value.trim().parse().map_err(|_| bad())?
            }
            "transactional.id" => {
                let id = value.trim();
                self.transactional_id = (!id.is_empty()).then(|| id.to_owned());
            }
            "transaction.timeout.ms" => {
                let timeout = ms()?;
                if timeout.is_zero() || timeout.as_millis() > i32::MAX as u128 {
                    return Err(bad());
                }
                self.transaction_timeout = timeout;
            }
            _ => {
                return Err(ClientError::InvalidArgument(format!(
                    "unknown producer setting {name}"
                )))
            }
        }
        Ok(self)
    }

    /// Refuses combinations Kafka refuses: idempotence with acks other than all (the
    /// broker could lose an acknowledged batch, and the sequence with it).
    pub fn validate(&self) -> Result<()> {
        if self.enable_idempotence && self.acks != Acks::All {
            return Err(ClientError::InvalidArgument(
                "enable.idempotence=true needs acks=all; set acks=all or enable.idempotence=false"
                    .into(),
            ));
        }
        if self.transactional_id.is_some() && !self.enable_idempotence {
            return Err(ClientError::InvalidArgument(
                "transactional.id needs enable.idempotence=true".into(),
            ));
        }
        if self.buffer_memory == 0 || self.max_batch_bytes == 0 {
            return Err(ClientError::InvalidArgument(
                "buffer.memory and batch.size must be positive".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_defaults_and_names() {
        let mut c = ProducerConfig::default();
        assert_eq!(c.buffer_memory, 33_554_432);
        assert_eq!(c.max_block, Duration::from_secs(60));
        assert!(c.enable_idempotence);
        c.set("buffer.memory", "4096")
            .unwrap()
            .set("max.block.ms", "250")
            .unwrap()
            .set("compression.type", "zstd")
            .unwrap();
        assert_eq!(c.buffer_memory, 4096);
        assert_eq!(c.max_block, Duration::from_millis(250));
        assert_eq!(c.compression, Compression::Zstd);
        assert!(c.set("buffer.memory", "0").is_err());
        assert!(c.set("linger.nonsense", "1").is_err());
    }

    #[test]
    fn idempotence_needs_acks_all() {
        let mut c = ProducerConfig::default();
        c.set("acks", "1").unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.contains("enable.idempotence") && err.contains("acks=all"),
            "{err}"
        );
        c.set("enable.idempotence", "false").unwrap();
        c.validate().unwrap();
    }

    #[test]
    fn transactional_settings_by_kafka_names() {
        let mut c = ProducerConfig::default();
        assert_eq!(c.transactional_id, None);
        assert_eq!(c.transaction_timeout, Duration::from_secs(60));
        c.set("transactional.id", "orders-tx")
            .unwrap()
            .set("transaction.timeout.ms", "15000")
            .unwrap();
        assert_eq!(c.transactional_id.as_deref(), Some("orders-tx"));
        assert_eq!(c.transaction_timeout, Duration::from_millis(15_000));
        assert!(c.set("transaction.timeout.ms", "0").is_err());
        c.validate().unwrap();
        c.set("enable.idempotence", "false").unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("transactional.id"), "{err}");
    }
}
