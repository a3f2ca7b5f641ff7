//! The module loads, registers its commands and configs, and the server answers.
use crate::common::*;

#[test]
fn module_loads_with_its_configs() {
    let server = Server::builder()
        .module_arg("bf-error-rate", "0.05")
        .start();
    let mut c = server.conn();
    let modules: redis::Value = redis::cmd("MODULE").arg("LIST").query(&mut c).unwrap();
    assert!(format!("{modules:?}").contains("lcbloom"));
    let rate: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("lcbloom.bf-error-rate")
        .query(&mut c)
        .unwrap();
    assert_eq!(rate[1], "0.05");
    let bad = redis::cmd("CONFIG")
        .arg("SET")
        .arg("lcbloom.lc-error-rate")
        .arg("1.5")
        .query::<()>(&mut c);
    assert!(err_text(bad).contains("lc-error-rate must be a number from"));
}
