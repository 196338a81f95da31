//! The top README's Rust example is `examples/readme.rs`, word for word
//! from its `use` lines on: the example compiles with the crate's
//! examples, and this test keeps the README's copy the same.

#[test]
fn the_readme_example_is_the_compiled_one() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = std::fs::read_to_string(root.join("examples/readme.rs")).expect("example");
    let readme = std::fs::read_to_string(root.join("../../README.md")).expect("README");
    let code = &example[example.find("use http::").expect("use lines")..];
    let shown = readme
        .split("```rust\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a Rust example in the README");
    assert_eq!(shown, code);
    // The [dependencies] above it name every crate the example uses.
    for dependency in ["redis-ratelimit-client", "http = \"1\"", "axum", "tokio"] {
        assert!(readme.contains(dependency), "{dependency}");
    }
}
