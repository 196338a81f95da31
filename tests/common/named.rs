//! Helpers for the tests of named policies: a server with `policies on`,
//! and calls whose reply must be `OK`, a string or an error.

use super::{call, Config, Server};
use redis::Value;

/// A server with named policies on.
pub fn policies() -> Server {
    Server::with(Config::default().with_policies())
}

/// Calls `args`, which must answer `OK`.
pub fn ok(c: &mut redis::Connection, args: &[&str]) {
    let v = call(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert_eq!(v, Value::Okay, "{args:?}");
}

/// Calls `args`, which must answer a string.
pub fn text(c: &mut redis::Connection, args: &[&str]) -> String {
    match call(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}")) {
        Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => panic!("{args:?}: {other:?}"),
    }
}

/// Calls `args`, which must fail: its error as `CODE detail`.
pub fn err(c: &mut redis::Connection, args: &[&str]) -> String {
    match call(c, args) {
        Err(e) => format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or("")),
        Ok(v) => panic!("{args:?} succeeded: {v:?}"),
    }
}
