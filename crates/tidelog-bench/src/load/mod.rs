//! Load generated with librdkafka (through `rdkafka`), so figures compare with any
//! Kafka-compatible broker: topic setup, producers, consumers, end-to-end latency.

pub(crate) mod admin;
pub(crate) mod client_stats;
pub(crate) mod consume;
pub(crate) mod e2e;
pub(crate) mod native;
pub(crate) mod native_consume;
pub(crate) mod native_produce;
pub(crate) mod produce;
pub(crate) mod rebalance;
pub(crate) mod share;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use rdkafka::config::ClientConfig;

/// Client settings by bootstrap address.
type SettingsByBootstrap = HashMap<String, Vec<(String, String)>>;

/// Client settings for particular bootstrap addresses (an SSL listener's
/// `security.protocol` and CA), which every client made for that address gets.
fn client_security() -> &'static Mutex<SettingsByBootstrap> {
    static SECURITY: OnceLock<Mutex<SettingsByBootstrap>> = OnceLock::new();
    SECURITY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// From now on clients of `bootstrap` connect with TLS, trusting the CA in `ca_file`.
pub(crate) fn use_tls_for(bootstrap: &str, ca_file: &std::path::Path) {
    let settings = vec![
        ("security.protocol".to_string(), "SSL".to_string()),
        ("ssl.ca.location".to_string(), ca_file.display().to_string()),
    ];
    if let Ok(mut map) = client_security().lock() {
        map.insert(bootstrap.to_string(), settings);
    }
}

/// A client config with the bootstrap address and quiet, bench-friendly defaults.
pub(crate) fn base_config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    if let Ok(map) = client_security().lock() {
        for (name, value) in map.get(bootstrap).into_iter().flatten() {
            config.set(name, value);
        }
    }
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "tidelog-bench")
        .set("broker.address.family", "v4")
        // librdkafka leaves Nagle on by default; with one request in flight that adds
        // delayed-ACK stalls (~40 ms) that are the client's, not the broker's.
        .set("socket.nagle.disable", "true")
        .set("log_level", "3");
    config
}

/// Extra librdkafka settings from the environment variable `var`, `name=value` pairs
/// separated by commas (for experiments; a run's report names what it used).
pub(crate) fn extra_settings(config: &mut ClientConfig, var: &str) {
    let Ok(value) = std::env::var(var) else {
        return;
    };
    for pair in value.split(',').filter(|p| !p.trim().is_empty()) {
        if let Some((name, value)) = pair.split_once('=') {
            config.set(name.trim(), value.trim());
        }
    }
}

/// A topic name no earlier run used, so every run starts from an empty topic.
pub(crate) fn fresh_topic(workload: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("bench-{workload}-{}-{nanos:x}-{n}", std::process::id())
}

/// Bytes that neither compress nor repeat (xorshift), so compression figures are honest.
pub(crate) fn incompressible(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// A progress bar on stderr (hidden when stderr is not a terminal) fed from a counter.
pub(crate) fn progress(label: &str, total: Option<u64>) -> ProgressBar {
    let bar = match total {
        Some(total) => ProgressBar::new(total),
        None => ProgressBar::new_spinner(),
    };
    let template = if total.is_some() {
        "{prefix:>12} [{bar:30}] {pos}/{len} {per_sec} {elapsed}"
    } else {
        "{prefix:>12} {spinner} {pos} {per_sec} {elapsed}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(label.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
