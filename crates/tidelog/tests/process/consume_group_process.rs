//! `tidelog consume --group G` against a real `tidelog serve`: it joins the group, reads
//! what the group is assigned from its committed offsets, commits exactly what it
//! printed, and leaves, so the next member goes on where it stopped.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::cli_run::tidelog;
use support::Node;

#[test]
fn a_group_consumer_commits_what_it_printed_and_the_next_one_goes_on_from_there() {
    let node = Node::start(&["group.initial.rebalance.delay.ms=0"]);
    let bootstrap = node.kafka.to_string();
    let run = |args: &[&str], stdin: &[u8]| {
        let out = tidelog(&bootstrap, args, stdin);
        assert!(out.ok, "tidelog {args:?}: {}", out.stderr);
        out.stdout
    };
    run(&["topic", "create", "jobs", "--partitions", "2"], b"");
    run(&["produce", "jobs"], b"j0\nj1\nj2\nj3\nj4\nj5\n");

    let first = run(
        &[
            "consume",
            "jobs",
            "--group",
            "workers",
            "--from-beginning",
            "--count",
            "4",
        ],
        b"",
    );
    assert_eq!(first.lines().count(), 4, "{first}");

    let described = run(
        &[
            "group",
            "describe",
            "workers",
            "--window-ms",
            "200",
            "--output",
            "json",
        ],
        b"",
    );
    let v: serde_json::Value = serde_json::from_str(&described).unwrap();
    let committed: i64 = v["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["committed_offset"].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(committed, 4, "{described}");
    // It left: nobody is a member any more.
    assert_eq!(
        v["members"].as_array().map(Vec::len),
        Some(0),
        "{described}"
    );

    // The next member starts at the committed offsets: only the two records not yet
    // printed, whatever --from-beginning says for partitions without a commit.
    let rest = run(
        &[
            "consume",
            "jobs",
            "--group",
            "workers",
            "--from-beginning",
            "--timeout-ms",
            "3000",
        ],
        b"",
    );
    let mut all: Vec<&str> = first.lines().chain(rest.lines()).collect();
    all.sort_unstable();
    assert_eq!(
        all,
        ["j0", "j1", "j2", "j3", "j4", "j5"],
        "{first}\n--\n{rest}"
    );
}
