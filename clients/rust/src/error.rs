//! Errors of a call: the server's own (its code and message kept), no
//! answer in time, the connection, a reply of an unexpected shape, or a
//! configuration the server would refuse.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Why a call (or a layer's configuration) failed. Cheap to clone: the
/// requests that waited for another's call get its error.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Error {
    /// The server refused the command: `code` is `ERR`, `WRONGTYPE`,
    /// `NOPERM`, ...; `message` the whole line, code first, as the server
    /// sent it (`WRONGTYPE key holds RL.BUCKET state, not RL.GCRA state`).
    Server {
        /// The error's first word.
        code: String,
        /// The whole line.
        message: String,
    },
    /// No answer within this time: the client's timeout plus the call's
    /// own `WAIT`, or, when the connection's own timeout (a response or
    /// read timeout set on it) fired first, the time waited for it.
    Timeout(Duration),
    /// Not sent: the store is known down (a recent call got no answer in
    /// time or its connection failed) and has not answered a probe since;
    /// see [`crate::PROBE_INTERVAL`].
    StoreDown,
    /// The connection failed (refused, dropped, reconnecting).
    Connection(Arc<redis::RedisError>),
    /// The reply did not have the shape the command's reference gives.
    Reply(String),
    /// A policy or option the server would refuse, found before sending.
    Config(String),
}

impl Error {
    /// A timeout the connection reported (whose length the redis crate
    /// does not say), as the time `waited` for it.
    pub(crate) fn with_deadline(self, waited: Duration) -> Error {
        match self {
            Error::Timeout(d) if d.is_zero() => Error::Timeout(waited),
            e => e,
        }
    }

    /// Whether the store could not be asked (as opposed to answering with
    /// an error): what a limit's fail-open or fail-closed choice is for.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Error::Timeout(_) | Error::Connection(_) | Error::StoreDown
        )
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Error {
        match e.code() {
            Some(code) if !e.is_io_error() && !e.is_timeout() => {
                let message = match e.detail() {
                    Some(detail) => format!("{code} {detail}"),
                    None => code.to_string(),
                };
                Error::Server {
                    code: code.to_string(),
                    message,
                }
            }
            _ if e.is_timeout() => Error::Timeout(Duration::ZERO),
            _ => Error::Connection(Arc::new(e)),
        }
    }
}

impl From<redis::ParsingError> for Error {
    fn from(e: redis::ParsingError) -> Error {
        Error::Reply(e.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Server { message, .. } => f.write_str(message),
            Error::Timeout(d) => write!(f, "no answer from the store within {d:?}"),
            Error::StoreDown => f.write_str("not sent: the store is down"),
            Error::Connection(e) => write!(f, "store connection: {e}"),
            Error::Reply(what) => write!(f, "unexpected reply: {what}"),
            Error::Config(what) => write!(f, "invalid configuration: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Connection(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}
