//! The `tidelog` binary: one executable for the server and every operator command.

mod bench;
mod cli;
mod generate;
mod kafka_process_settings;
mod plan;
mod serve;

use clap::{Parser, Subcommand};

/// tidelog: a replicated append-only log that speaks the Kafka protocol.
#[derive(Parser)]
#[command(name = "tidelog", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node (broker and controller). With no flags: a complete cluster of one on 127.0.0.1:9092.
    Serve(serve::ServeArgs),
    /// Create, list, describe, alter and delete topics.
    Topic(cli::topic::TopicArgs),
    /// Describe and alter dynamic broker configs (per broker or cluster-wide), live.
    BrokerConfig(cli::broker_config::BrokerConfigArgs),
    /// Produce lines from stdin as records.
    Produce(cli::produce::ProduceArgs),
    /// Consume records and print them.
    Consume(cli::consume::ConsumeArgs),
    /// List, describe (lag), reset offsets of, and delete consumer groups.
    Group(cli::group::GroupArgs),
    /// List, describe (start offsets, lag), reset offsets of, and delete share groups (KIP-932).
    ShareGroup(cli::share_group::ShareGroupArgs),
    /// Controller quorum, brokers and partition health; plan moves onto a new broker.
    Cluster(cli::cluster::ClusterArgs),
    /// Reassign partitions, list moves in progress, elect leaders.
    Partition(cli::partition::PartitionArgs),
    /// Create, list and delete SCRAM users (SASL).
    User(cli::user::UserArgs),
    /// Add, list and remove ACLs (with authorizer.class.name set).
    Acl(cli::acl::AclArgs),
    /// Set, list and remove client quotas (byte rates, request percentage).
    Quota(cli::quota::QuotaArgs),
    /// Back-of-envelope capacity plan from stated assumptions.
    Plan(plan::PlanArgs),
    /// Benchmarks against this machine's ceilings (runs tidelog-bench).
    #[command(disable_help_flag = true)]
    Bench(bench::BenchArgs),
    /// Print a shell completion script (bash, zsh, fish) on stdout.
    Completion(generate::CompletionArgs),
    /// Print the tidelog(1) man page (roff) on stdout.
    Man,
}

fn main() {
    let cli = Cli::parse();
    // One clean line (with its causes) and exit code 1: an operator-facing error, not a
    // backtrace, even where RUST_BACKTRACE is set.
    if let Err(e) = run(cli.command) {
        eprintln!("error: {}", describe(&e));
        std::process::exit(1);
    }
}

/// The error and its causes on one line, each cause once: many errors already end with
/// their cause's text (`cannot listen on ...: Address in use (os error 98)`), and
/// printing the chain as well would say it twice.
fn describe(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(args) => serve::run(args),
        Command::Topic(args) => cli::topic::run(args),
        Command::BrokerConfig(args) => cli::broker_config::run(args),
        Command::Produce(args) => cli::produce::run(args),
        Command::Consume(args) => cli::consume::run(args),
        Command::Group(args) => cli::group::run(args),
        Command::ShareGroup(args) => cli::share_group::run(args),
        Command::Cluster(args) => cli::cluster::run(args),
        Command::Partition(args) => cli::partition::run(args),
        Command::User(args) => cli::user::run(args),
        Command::Acl(args) => cli::acl::run(args),
        Command::Quota(args) => cli::quota::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Completion(args) => generate::completion(args),
        Command::Man => generate::man(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that says its cause and also returns it as its source.
    #[derive(Debug)]
    struct Bind {
        source: std::io::Error,
    }

    impl std::fmt::Display for Bind {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot listen on 127.0.0.1:1: {}", self.source)
        }
    }

    impl std::error::Error for Bind {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn causes_already_in_the_message_are_not_repeated() {
        let io = std::io::Error::from_raw_os_error(98);
        let text = io.to_string();
        let e = anyhow::Error::new(Bind { source: io }).context("starting the node");
        let line = describe(&e);
        assert_eq!(line.matches(&text).count(), 1, "{line}");
        assert!(
            line.starts_with("starting the node: cannot listen on"),
            "{line}"
        );
    }
}
