//! Errors of a call: the server's own (its code and message kept), no
//! answer in time, the connection, or a reply of an unexpected shape.

use std::fmt;
use std::time::Duration;

#[derive(Debug)]
pub enum Error {
    /// The server refused the command: `code` is `ERR`, `WRONGTYPE`,
    /// `NOPERM`, ...; `message` the whole line, code first, as the server
    /// sent it (`WRONGTYPE key holds RL.BUCKET state, not RL.GCRA state`).
    Server { code: String, message: String },
    /// No answer within the client's timeout.
    Timeout(Duration),
    /// The connection failed (refused, dropped, reconnecting).
    Connection(redis::RedisError),
    /// The reply did not have the shape the command's reference gives.
    Reply(String),
}

impl Error {
    /// Whether the store could not be asked (as opposed to answering with
    /// an error): what a limit's fail-open or fail-closed choice is for.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Timeout(_) | Error::Connection(_))
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
            _ => Error::Connection(e),
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
            Error::Connection(e) => write!(f, "store connection: {e}"),
            Error::Reply(what) => write!(f, "unexpected reply: {what}"),
        }
    }
}

impl std::error::Error for Error {}
