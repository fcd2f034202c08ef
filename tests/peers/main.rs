//! Real consumers that Maven Central ships (pinned by the poms under `tests/peers/<name>/`,
//! resolved by `scripts/peer-jars.sh`), each against the whole product under a live workload
//! with a fresh seed per run (`common::demo::fresh_seed`).

#[path = "../common/mod.rs"]
mod common;

mod canal;
mod catalog;
mod functions;
mod maxwell;
mod mysql8;
