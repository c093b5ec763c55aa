//! Every process test of the tidelog binary in one test binary: each module starts real
//! `tidelog` processes on loopback ports with temp dirs. One binary links once, where one
//! per file linked the client, the protocol codec and tokio twenty times over.

mod support;

mod bench_cli;
mod cli;
mod cli_output_process;
mod cluster_admin;
mod cluster_ops_process;
mod cluster_process;
mod consume_group_process;
mod consumer_cooperative_process;
mod consumer_group_process;
mod consumer_kip848_member_process;
mod consumer_kip848_process;
mod consumer_kip848_regex_process;
mod consumer_process;
mod consumer_read_committed_process;
mod dead_letter_process;
mod deploy_lint;
mod group_lag_process;
mod metrics_documented_process;
mod metrics_process;
mod operator_process;
mod partition_dirs_process;
mod payments_process;
mod plan_bootstrap;
mod plan_cli;
mod postgres_sink_process;
mod producer_background_process;
mod producer_process;
mod replication_process;
mod serve_process;
mod server_properties_process;
mod transaction_process;
