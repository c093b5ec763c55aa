//! `tls`: what TLS costs. One spawned broker with a PLAINTEXT and an SSL listener;
//! each run produces `count` records through one listener and reads them back, then
//! the same through the other (the order alternates run by run, so neither protocol
//! always meets a warmer page cache). The report gives each TLS figure with its
//! plaintext counterpart as the ceiling, so the ratio column is TLS ÷ plaintext:
//! throughput (MB/s, medians of the runs) and the broker's CPU seconds per GB moved.
//!
//! TLS is the load's librdkafka (`security.protocol=SSL`, OpenSSL) against the
//! broker's rustls; over PLAINTEXT the broker sends fetched records with `sendfile`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};

use crate::broker::SpawnedBroker;
use crate::cli::TlsArgs;
use crate::load::{self, admin, consume, produce};
use crate::report::Figure;
use crate::stats::median;
use crate::targets;

/// A CA and the broker's key store (its key and a certificate for 127.0.0.1), in a
/// temporary directory that lives as long as this.
pub(crate) struct TlsFiles {
    _dir: tempfile::TempDir,
    pub(crate) ca: PathBuf,
    pub(crate) keystore: PathBuf,
}

impl TlsFiles {
    pub(crate) fn make(work_root: &Path) -> anyhow::Result<TlsFiles> {
        let dir = tempfile::Builder::new()
            .prefix("tidelog-bench-tls-")
            .tempdir_in(work_root)?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "tidelog-bench CA");
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
        let key = KeyPair::generate()?;
        let mut server = CertificateParams::new(vec!["localhost".to_string()])?;
        server
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        let server = server.signed_by(&key, &ca)?;
        let ca_path = dir.path().join("ca.pem");
        let keystore = dir.path().join("keystore.pem");
        std::fs::write(&ca_path, ca.pem()).context("writing the bench CA")?;
        std::fs::write(&keystore, key.serialize_pem() + &server.pem())
            .context("writing the bench key store")?;
        Ok(TlsFiles {
            _dir: dir,
            ca: ca_path,
            keystore,
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Plaintext,
    Tls,
}

/// A figure of the report: id, workload, unit, and what it takes from a sample.
type Row = (&'static str, &'static str, &'static str, fn(&Sample) -> f64);

/// One run through one listener.
struct Sample {
    produce_mb_s: f64,
    consume_mb_s: f64,
    /// The broker's CPU seconds per GB while producing / consuming.
    produce_cpu_s_per_gb: f64,
    consume_cpu_s_per_gb: f64,
}

pub(crate) fn figures(
    broker: &SpawnedBroker,
    files: &TlsFiles,
    args: &TlsArgs,
) -> anyhow::Result<Vec<Figure>> {
    let plaintext = broker.bootstrap();
    let tls = broker
        .ssl_bootstrap()
        .ok_or_else(|| anyhow!("the spawned broker has no SSL listener"))?;
    load::use_tls_for(&tls, &files.ca);
    let runs = args.runs.max(1);
    let (mut plain_samples, mut tls_samples) = (Vec::new(), Vec::new());
    for run in 0..runs {
        let order = if run % 2 == 0 {
            [Protocol::Plaintext, Protocol::Tls]
        } else {
            [Protocol::Tls, Protocol::Plaintext]
        };
        for protocol in order {
            let (bootstrap, samples) = match protocol {
                Protocol::Plaintext => (&plaintext, &mut plain_samples),
                Protocol::Tls => (&tls, &mut tls_samples),
            };
            samples.push(one_run(broker, &plaintext, bootstrap, args)?);
        }
    }
    let med = |samples: &[Sample], pick: fn(&Sample) -> f64| {
        median(&samples.iter().map(pick).collect::<Vec<_>>())
    };
    let how = format!(
        "{runs} runs of {} × {} B over {} partitions per protocol, interleaved; medians; ceiling = the same over PLAINTEXT on the same broker",
        args.count, args.record_size, args.partitions
    );
    let mut figures = Vec::new();
    let rows: [Row; 4] = [
        ("tls-produce", "produce over TLS", "MB/s", |s| {
            s.produce_mb_s
        }),
        ("tls-consume", "consume over TLS", "MB/s", |s| {
            s.consume_mb_s
        }),
        (
            "tls-produce-cpu",
            "broker CPU producing over TLS",
            "core-s/GB",
            |s| s.produce_cpu_s_per_gb,
        ),
        (
            "tls-consume-cpu",
            "broker CPU consuming over TLS",
            "core-s/GB",
            |s| s.consume_cpu_s_per_gb,
        ),
    ];
    for (id, workload, unit, pick) in rows {
        figures.push(
            Figure::new(id, workload, med(&tls_samples, pick), unit)
                .ceiling(med(&plain_samples, pick))
                .note(how.clone()),
        );
    }
    Ok(figures)
}

fn one_run(
    broker: &SpawnedBroker,
    admin_bootstrap: &str,
    bootstrap: &str,
    args: &TlsArgs,
) -> anyhow::Result<Sample> {
    let topic = load::fresh_topic("tls");
    admin::create_topic(admin_bootstrap, &topic, args.partitions, 1, &[])?;
    let cpu_start = broker.cpu_seconds().unwrap_or(f64::NAN);
    let spec = targets::produce_spec(bootstrap, &topic, args.record_size, args.count);
    let produced = produce::run(&spec)?;
    let cpu_produced = broker.cpu_seconds().unwrap_or(f64::NAN);
    let consumed = consume::run(bootstrap, &topic, Duration::from_secs(600))?;
    let cpu_consumed = broker.cpu_seconds().unwrap_or(f64::NAN);
    admin::delete_topic(admin_bootstrap, &topic);
    let per_gb = |cpu: f64, bytes: u64| cpu / (bytes as f64 / 1e9).max(1e-9);
    Ok(Sample {
        produce_mb_s: produced.mb_s,
        consume_mb_s: consumed.mb_s,
        produce_cpu_s_per_gb: per_gb(cpu_produced - cpu_start, produced.bytes),
        consume_cpu_s_per_gb: per_gb(cpu_consumed - cpu_produced, consumed.bytes),
    })
}
