//! A node's one-voter controller quorum in a temp data directory: what `tidelog serve`
//! runs without `--quorum`, started and restarted in-process for the controller tests.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tidelog_controller::quorum::{
    start_voter, QuorumConfig, QuorumController, QuorumError, RequestError,
};
use tidelog_controller::{CreateTopic, Endpoint, MetadataImage, TopicDefaults, TopicImage, Uuid};

pub const DEFAULTS: TopicDefaults = TopicDefaults {
    num_partitions: 3,
    replication_factor: 1,
};

pub struct SingleVoter {
    pub data_dir: PathBuf,
    pub node_id: i32,
    pub controller: Arc<QuorumController>,
    tune: fn(&mut QuorumConfig),
}

impl SingleVoter {
    /// Starts the voter on `data_dir` as node `node_id`, elected and ready for requests.
    pub async fn open_as(data_dir: &Path, node_id: i32) -> Result<SingleVoter, QuorumError> {
        SingleVoter::open_tuned(data_dir, node_id, |_| {}).await
    }

    /// [`SingleVoter::open_as`] with `tune` applied to the voter's configuration.
    pub async fn open_tuned(
        data_dir: &Path,
        node_id: i32,
        tune: fn(&mut QuorumConfig),
    ) -> Result<SingleVoter, QuorumError> {
        let mut config = QuorumConfig::single_node(data_dir, node_id)?;
        tune(&mut config);
        let quorum = Arc::new(start_voter(config).await?);
        assert!(quorum.wait_until_leader(Duration::from_secs(10)).await);
        let controller = QuorumController::start(quorum, DEFAULTS, Duration::from_secs(60));
        Ok(SingleVoter {
            data_dir: data_dir.to_path_buf(),
            node_id,
            controller,
            tune,
        })
    }

    /// Node 1 on `data_dir`, registered as a broker (so topics can be placed on it),
    /// as the node does at every start.
    pub async fn open(data_dir: &Path) -> SingleVoter {
        let voter = SingleVoter::open_as(data_dir, 1).await.unwrap();
        voter.register(Uuid::new_v4()).await;
        voter
    }

    /// Registers this node's broker and heartbeats once, as the node does at start (a
    /// new incarnation stays fenced until its first heartbeat). Returns its epoch.
    pub async fn register(&self, incarnation: Uuid) -> i64 {
        let epoch = self
            .controller
            .register_broker(self.node_id, incarnation, endpoint(9092), None)
            .await
            .unwrap();
        self.controller
            .broker_heartbeat(self.node_id, epoch)
            .await
            .unwrap();
        epoch
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.controller.image()
    }

    /// Stops the voter cleanly (as `tidelog serve` does on SIGTERM).
    pub async fn stop(self) {
        self.controller.shutdown().await;
        self.controller.quorum().shutdown().await.unwrap();
    }

    /// Stops and starts the voter again on the same directory, without registering.
    pub async fn restart(self) -> SingleVoter {
        let (dir, id, tune) = (self.data_dir.clone(), self.node_id, self.tune);
        self.stop().await;
        SingleVoter::open_tuned(&dir, id, tune).await.unwrap()
    }

    pub async fn create(&self, req: CreateTopic) -> Result<TopicImage, RequestError> {
        self.controller.create_topic(req, false).await
    }
}

pub fn endpoint(port: u16) -> Vec<Endpoint> {
    vec![Endpoint {
        name: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port,
    }]
}

pub fn create(name: &str, partitions: i32, rf: i16) -> CreateTopic {
    CreateTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: rf,
        assignments: vec![],
        configs: vec![],
    }
}

pub fn code<T: std::fmt::Debug>(r: Result<T, RequestError>) -> i16 {
    r.unwrap_err().error_code()
}
