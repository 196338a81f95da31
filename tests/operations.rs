//! What operators meet first: replicas loading asynchronously, ACL rules,
//! unloading and reloading the module on the server `make run` starts.

mod common;
use common::topology::{replica_config, wait_link_up};
use common::*;

/// With `repl-diskless-load swapdb`, a replica loads its primary's data
/// while serving the old: Redis allows it only if every module declares it
/// handles that, and otherwise falls back to loading from disk.
#[test]
fn a_replica_loads_asynchronously_with_the_module() {
    let primary = Server::with(Config::default().arg("repl-diskless-sync", "yes"));
    let mut p = primary.conn();
    clock_set(&mut p, T0);
    decide(&mut p, &["RL.GCRA", "rl:user:1", "10", "1m"]);
    let replica = Server::with(replica_config(&primary).arg("repl-diskless-load", "swapdb"));
    wait_link_up(&replica);
    let log = replica.log();
    assert!(!log.contains("Skipping diskless-load"), "{log}");
    assert!(log.contains("receiving streamed RDB from"), "{log}");
    assert!(
        log.contains("Swapping active DB with loaded DB"),
        "no async load: {log}"
    );
    let mut r = replica.conn();
    assert_eq!(
        get_bytes(&mut r, "rl:user:1"),
        get_bytes(&mut p, "rl:user:1")
    );
}
