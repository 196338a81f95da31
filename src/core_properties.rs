//! Property tests of the pure core: the algorithms, the state codec (the
//! window limiters on their stored bytes) and the argument parsers, with
//! the time passed in and no server. Proptest keeps each file's failure
//! seeds in `proptest-regressions/core_properties/`.

mod gcra_bucket;
mod hostile_inputs;
mod windows;
