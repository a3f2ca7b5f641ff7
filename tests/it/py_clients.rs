//! The Python client tests (tests/py, pytest and redis-py) against servers this harness starts:
//! one server with the module, and a three-node cluster. The harness is the only place that
//! launches servers (ports, module, `REDIS_SERVER`, temp dirs, clean-up); tests/py/conftest.py
//! only connects to the ports it is given (`LCBLOOM_TEST_PORT`, `LCBLOOM_TEST_CLUSTER`).
//! `PYTEST_ARGS` narrows the run (e.g. `-k cluster`).

use crate::common::*;
use std::path::Path;
use std::process::Command;

#[test]
fn redis_py_clients_examples_and_readme() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(".venv/bin/python");
    if !python.exists() {
        missing("the Python venv (.venv/bin/python; `make deps-python` creates it)");
        return;
    }
    // The client tests ask about items never added: the same answers on every run.
    let server = Server::builder().fixed_seed().start();
    let nodes = Server::cluster_with(ServerBuilder::fixed_seed);
    let cluster: Vec<String> = nodes.iter().map(|n| n.port.to_string()).collect();
    let extra = std::env::var("PYTEST_ARGS").unwrap_or_default();
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/py"])
        .args(extra.split_whitespace())
        .current_dir(root)
        .env("LCBLOOM_TEST_PORT", server.port.to_string())
        .env("LCBLOOM_TEST_CLUSTER", cluster.join(","))
        .output()
        .expect("run pytest");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "pytest failed:\n{report}");
    assert!(report.contains(" passed"), "{report}");
    assert!(!report.contains(" skipped"), "{report}");
}
