//! The crate's folders are its layers, each using only those below it (as
//! `src/lib.rs` lists them): every `crate::` path in a layer's code names
//! its own layer or a lower one. Test modules may reach higher (a core
//! test may quote an error reply); the product code may not.

use std::fs;
use std::path::Path;

/// From the bottom up.
const LAYERS: [&str; 7] = [
    "bounds",
    "algorithm",
    "codec",
    "policy",
    "engine",
    "commands",
    "server",
];

fn layer_of(name: &str) -> Option<usize> {
    LAYERS.iter().position(|l| *l == name)
}

/// The code of a file before its first `#[cfg(test)]`.
fn product_code(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |i| &text[..i])
}

/// The layers named by `crate::NAME` paths in `code`.
fn named_layers(code: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if let Some(layer) = layer_of(&name) {
            found.push((name, layer));
        }
    }
    found
}

/// A module of tests only (`tests.rs`, `props.rs`, `window_props.rs`).
fn is_test_module(path: &Path) -> bool {
    let name = path.file_stem().and_then(|n| n.to_str()).unwrap_or("");
    name == "tests" || name.ends_with("props") || name.ends_with("properties")
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !is_test_module(&path) {
            out.push(path);
        }
    }
}

#[test]
fn each_layer_uses_only_those_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut wrong = Vec::new();
    for (own, layer) in LAYERS.iter().enumerate() {
        let mut all: Vec<_> = Some(src.join(format!("{layer}.rs")))
            .filter(|root| root.exists())
            .into_iter()
            .collect();
        if src.join(layer).is_dir() {
            files(&src.join(layer), &mut all);
        }
        for file in all {
            let text = fs::read_to_string(&file).unwrap();
            for (name, used) in named_layers(product_code(&text)) {
                if used > own {
                    wrong.push(format!("{} uses crate::{name}", file.display()));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports from a higher layer:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_module_of_the_crate_root_is_a_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap();
    for line in lib.lines().map(str::trim) {
        let Some(name) = line
            .strip_prefix("mod ")
            .or_else(|| line.strip_prefix("pub mod "))
        else {
            continue;
        };
        let name = name.trim_end_matches(';');
        // `api` is the surface, `core_properties` the pure core's tests.
        assert!(
            layer_of(name).is_some() || name == "api" || name == "core_properties",
            "src/lib.rs declares `{name}`, which is not a layer"
        );
    }
}
