//! A small HTTP API limited per API key and globally with `RL.ALL`.
//!
//! ```sh
//! make run                                   # redis-server with the module, port 6379
//! cargo run --example http_api               # serves 127.0.0.1:3000
//! curl -i -H 'X-Api-Key: alice' 127.0.0.1:3000/hello
//! ```
//!
//! `REDIS_URL` (default `redis://127.0.0.1:6379/`) and `LISTEN` (default
//! `127.0.0.1:3000`) override the addresses.

mod app;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let redis_url = std::env::var("REDIS_URL").unwrap_or("redis://127.0.0.1:6379/".into());
    let listen = std::env::var("LISTEN").unwrap_or("127.0.0.1:3000".into());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // Reconnects by itself: a Redis restart costs a second, not an outage.
        let redis = app::connect(&redis_url)?;
        let router = app::router(app::App::new(redis, app::Limits::standard()?)?);
        let listener = tokio::net::TcpListener::bind(&listen).await?;
        println!("listening on http://{listen}/hello (send an X-Api-Key header)");
        axum::serve(listener, router).await?;
        Ok(())
    })
}
