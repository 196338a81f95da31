//! The top README's Rust example, whole: 100 requests a minute per API key
//! on an axum service (`cargo run -p redis-ratelimit-client --example readme`).

use http::{HeaderName, StatusCode};
use redis_ratelimit_client::http::{HeaderKey, HttpLimit, RedisRateLimitLayer};
use redis_ratelimit_client::{connect, Client, Gcra};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::new(connect("redis://127.0.0.1/")?); // 300 ms per call
    let api_key = HeaderKey::new(HeaderName::from_static("x-api-key"));
    let layer = RedisRateLimitLayer::builder(client, api_key)
        .limit(HttpLimit::per_key(Gcra::new(100, Duration::from_secs(60))).prefix("rl:key:"))
        .missing_key(StatusCode::UNAUTHORIZED, "missing X-Api-Key\n")
        .build()?; // 429 with Retry-After, RateLimit and RateLimit-Policy
    let app = axum::Router::new()
        .route("/hello", axum::routing::get(|| async { "hello\n" }))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    axum::serve(listener, app).await?;
    Ok(())
}
