//! The node-redis client tests (tests/node, Node.js's test runner and the npm package `redis`)
//! against servers this harness starts: one with lcbloom, one with RedisBloom 2.8.2 to compare
//! replies with, and a three-node cluster. As with the Python client tests, the harness is the
//! only place that launches servers; tests/node only connects to the ports it is given
//! (`LCBLOOM_TEST_PORT`, `REDISBLOOM_TEST_PORT`, `LCBLOOM_TEST_CLUSTER`).

use crate::common::*;
use std::path::Path;
use std::process::Command;

#[test]
fn node_redis_answers_as_with_redisbloom() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tests = root.join("tests/node");
    if !tests.join("node_modules/redis").exists() {
        missing("node-redis (tests/node/node_modules; `make deps-node` installs it)");
        return;
    }
    let Some(redisbloom) = redisbloom::module() else {
        return;
    };
    // Items never added are asked about: the same answers on every run.
    let server = Server::builder().fixed_seed().start();
    let peer = redisbloom::server(&redisbloom);
    let nodes = Server::cluster_with(ServerBuilder::fixed_seed);
    let cluster: Vec<String> = nodes.iter().map(|n| n.port.to_string()).collect();
    let out = Command::new("node")
        .args(["--test", "--test-reporter=tap"])
        .current_dir(&tests)
        .env("LCBLOOM_TEST_PORT", server.port.to_string())
        .env("REDISBLOOM_TEST_PORT", peer.port.to_string())
        .env("LCBLOOM_TEST_CLUSTER", cluster.join(","))
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            missing(&format!(
                "Node.js (`node`: {e}; `make deps-node` installs it)"
            ));
            return;
        }
    };
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "node --test failed:\n{report}");
    let count = |what: &str| -> u32 {
        report
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# {what} ")))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no \"# {what}\" line in:\n{report}"))
    };
    assert!(count("pass") > 0, "{report}");
    assert_eq!(count("fail"), 0, "{report}");
    assert_eq!(count("skipped"), 0, "{report}");
}
