//! Compiles the kvproto subset under `proto/` into Rust (prost messages plus
//! tonic clients and servers).
//!
//! `protoc` comes from the `protoc-bin-vendored` crate so the build does not
//! depend on a system-wide installation.

use std::path::PathBuf;

/// Every `.proto` file of the crate; imports between them resolve against the
/// `proto/` directory.
const PROTOS: &[&str] = &[
    "apipb.proto",
    "cdcpb.proto",
    "deadlock.proto",
    "encryptionpb.proto",
    "eraftpb.proto",
    "errorpb.proto",
    "kvrpcpb.proto",
    "metapb.proto",
    "pdpb.proto",
    "raft_cmdpb.proto",
    "raft_serverpb.proto",
    "resource_manager.proto",
    "tikvpb.proto",
    "tracepb.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    println!("cargo:rerun-if-changed={}", proto_dir.display());
    println!("cargo:rerun-if-changed=build.rs");

    // prost-build looks up `PROTOC` when it runs the compiler.
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    std::env::set_var("PROTOC", protoc);

    let files: Vec<PathBuf> = PROTOS.iter().map(|f| proto_dir.join(f)).collect();
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Server traits get default methods answering UNIMPLEMENTED, so a
        // simulator only implements the RPCs it serves (like an older server
        // that lacks a method).
        .generate_default_stubs(true)
        // Scan pages carry most of the bytes a snapshot read moves: their keys and values
        // are slices of the received frame instead of one allocation and copy each.
        .bytes(".kvrpcpb.KvPair")
        // A pair's key error is rare and large (every kind of key error inline, well over a
        // kilobyte): boxed, a page's vector of pairs is a few words per pair instead of
        // copying that size for every pair received.
        .boxed(".kvrpcpb.KvPair.error")
        .compile_protos(&files, std::slice::from_ref(&proto_dir))?;
    Ok(())
}
