//! The key a request is limited by: a header's value, the peer's address,
//! the client's address as a proxy reports it, one key for everyone, or
//! any function of the request.

use http::request::Parts;
use http::{HeaderMap, HeaderName};
use std::fmt::Display;
use std::net::{IpAddr, SocketAddr};

/// Takes the key that requests are limited by (an API key, a user, an IP)
/// from a request. The key is written into the store key with
/// [`Display`]. `None` is a request the layer cannot key: answered `500`
/// by default (a misconfiguration, such as [`PeerIp`] without the peer's
/// address), or as [`super::Builder::missing_key`] says (`401` for a
/// missing API key). Any `Fn(&Parts) -> Option<T>` with `T: Display` is
/// one.
///
/// ```
/// use redis_ratelimit_client::http::KeyExtractor;
/// // Typed: a user id, from a header a gateway sets.
/// #[derive(Clone)]
/// struct UserId;
/// impl KeyExtractor for UserId {
///     type Key = u64;
///     fn key(&self, request: &http::request::Parts) -> Option<u64> {
///         request.headers.get("x-user-id")?.to_str().ok()?.parse().ok()
///     }
/// }
/// let request = http::Request::get("/").header("x-user-id", "42").body(()).unwrap();
/// assert_eq!(UserId.key(&request.into_parts().0), Some(42));
/// ```
pub trait KeyExtractor: Clone + Send + Sync + 'static {
    /// What the key is; the store key holds its [`Display`] form.
    type Key: Display;

    /// The request's key, or `None` when it has none.
    fn key(&self, request: &Parts) -> Option<Self::Key>;
}

impl<F, T> KeyExtractor for F
where
    F: Fn(&Parts) -> Option<T> + Clone + Send + Sync + 'static,
    T: Display,
{
    type Key = T;

    fn key(&self, request: &Parts) -> Option<T> {
        self(request)
    }
}

/// The value of a request header (non-empty, visible ASCII) as the key:
/// the whole value of its first field line.
///
/// ```
/// use redis_ratelimit_client::http::HeaderKey;
/// let by_api_key = HeaderKey::new(http::HeaderName::from_static("x-api-key"));
/// let by_auth = HeaderKey::new(http::header::AUTHORIZATION);
/// # let _ = (by_api_key, by_auth);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HeaderKey(HeaderName);

impl HeaderKey {
    /// The value of the header `name`.
    pub fn new(name: HeaderName) -> HeaderKey {
        HeaderKey(name)
    }
}

impl KeyExtractor for HeaderKey {
    type Key = String;

    fn key(&self, request: &Parts) -> Option<String> {
        request
            .headers
            .get(&self.0)
            .and_then(|v| v.to_str().ok())
            .filter(|k| !k.is_empty())
            .map(str::to_string)
    }
}

/// The peer's IP address as the key: a [`SocketAddr`] in the request's
/// extensions (put there by the server, or by a layer in front), or, with
/// the crate's `axum` feature, axum's `ConnectInfo<SocketAddr>` (serve
/// with `into_make_service_with_connect_info::<SocketAddr>()`). Neither
/// there, the request has no key (`500` by default): axum's
/// `ConnectInfo` is read only with the `axum` feature. Behind a proxy
/// every request has the proxy's address: use [`SmartIp`].
#[derive(Clone, Copy, Debug, Default)]
pub struct PeerIp;

impl PeerIp {
    /// The peer's IP address as the key.
    pub const fn new() -> PeerIp {
        PeerIp
    }
}

impl KeyExtractor for PeerIp {
    type Key = IpAddr;

    fn key(&self, request: &Parts) -> Option<IpAddr> {
        peer(request)
    }
}

fn peer(request: &Parts) -> Option<IpAddr> {
    let addr = request.extensions.get::<SocketAddr>().copied();
    #[cfg(feature = "axum")]
    let addr = addr.or_else(|| {
        request
            .extensions
            .get::<axum::extract::ConnectInfo<SocketAddr>>()
            .map(|c| c.0)
    });
    Some(addr?.ip())
}

/// The client's IP address as proxies report it, else the peer's: the
/// first `for=` of `Forwarded` (RFC 7239), the first address of
/// `X-Forwarded-For`, `X-Real-IP`, then [`PeerIp`]'s address. A value
/// that is not an address (`for=unknown`, an obfuscated name) is skipped.
///
/// Only behind a proxy that sets these fields (and drops what callers
/// send): a caller that reaches the service directly chooses its own key
/// with them.
///
/// ```
/// use redis_ratelimit_client::http::{KeyExtractor, SmartIp};
/// let request = http::Request::get("/")
///     .header("x-forwarded-for", "203.0.113.7, 10.0.0.1")
///     .body(())
///     .unwrap();
/// assert_eq!(SmartIp.key(&request.into_parts().0), "203.0.113.7".parse().ok());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct SmartIp;

impl SmartIp {
    /// The client's IP address as proxies report it, else the peer's.
    pub const fn new() -> SmartIp {
        SmartIp
    }
}

impl KeyExtractor for SmartIp {
    type Key = IpAddr;

    fn key(&self, request: &Parts) -> Option<IpAddr> {
        let h = &request.headers;
        forwarded(h)
            .or_else(|| first_field(h, "x-forwarded-for").and_then(|v| address(first_item(v))))
            .or_else(|| first_field(h, "x-real-ip").and_then(address))
            .or_else(|| peer(request))
    }
}

/// One key for every request: a per-key limit of the layer is then one
/// limit for the whole service (stored at its prefix + `global`).
#[derive(Clone, Copy, Debug, Default)]
pub struct GlobalKey;

impl GlobalKey {
    /// The same key for every request.
    pub const fn new() -> GlobalKey {
        GlobalKey
    }
}

impl KeyExtractor for GlobalKey {
    type Key = &'static str;

    fn key(&self, _: &Parts) -> Option<&'static str> {
        Some("global")
    }
}

fn first_field<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name)?.to_str().ok()
}

fn first_item(value: &str) -> &str {
    value.split(',').next().unwrap_or("")
}

/// The `for=` of `Forwarded`'s first element.
fn forwarded(headers: &HeaderMap) -> Option<IpAddr> {
    first_item(first_field(headers, "forwarded")?)
        .split(';')
        .find_map(|pair| {
            let (name, value) = pair.split_once('=')?;
            name.trim()
                .eq_ignore_ascii_case("for")
                .then(|| address(value))?
        })
}

/// An address as proxies write it: `192.0.2.1`, `2001:db8::1`, with a
/// port (`192.0.2.1:80`, `[2001:db8::1]:80`), quoted or not.
fn address(value: &str) -> Option<IpAddr> {
    let value = value.trim().trim_matches('"');
    if let Ok(ip) = value.parse() {
        return Some(ip);
    }
    if let Ok(addr) = value.parse::<SocketAddr>() {
        return Some(addr.ip());
    }
    let inner = value.strip_prefix('[')?.split(']').next()?;
    inner.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(fields: &[(&str, &str)]) -> Parts {
        let mut request = http::Request::get("/");
        for (name, value) in fields {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap().into_parts().0
    }

    fn smart(fields: &[(&str, &str)]) -> Option<String> {
        SmartIp.key(&parts(fields)).map(|ip| ip.to_string())
    }

    #[test]
    fn proxies_fields_in_order_then_the_peer() {
        let xff = ("x-forwarded-for", "203.0.113.7, 10.0.0.1");
        let real = ("x-real-ip", "198.51.100.2");
        let fwd = (
            "forwarded",
            "for=\"[2001:db8::1]:4711\";proto=https, for=10.0.0.1",
        );
        assert_eq!(smart(&[xff, real, fwd]).as_deref(), Some("2001:db8::1"));
        assert_eq!(smart(&[xff, real]).as_deref(), Some("203.0.113.7"));
        assert_eq!(smart(&[real]).as_deref(), Some("198.51.100.2"));
        // Not an address: the next source.
        assert_eq!(
            smart(&[("forwarded", "for=unknown"), real]).as_deref(),
            Some("198.51.100.2")
        );
        assert_eq!(
            smart(&[("forwarded", "proto=http;For=192.0.2.60:8080")]).as_deref(),
            Some("192.0.2.60")
        );
        assert_eq!(smart(&[("x-forwarded-for", "junk")]), None);
        let mut p = parts(&[]);
        p.extensions.insert(SocketAddr::from(([127, 0, 0, 9], 5)));
        assert_eq!(SmartIp.key(&p), Some(IpAddr::from([127, 0, 0, 9])));
        assert_eq!(PeerIp.key(&p), Some(IpAddr::from([127, 0, 0, 9])));
    }
}
