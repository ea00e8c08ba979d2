//! Compiles the ncclbind C runtime and the generated C wrappers with the system C compiler
//! (the runtime's one C++ file, foreign_exceptions.cc, with the C++ compiler) into one static
//! archive, and links it with -ldl -lpthread -lstdc++. No crates: `cc`, `c++` and `ar` are run
//! directly ($CC / $CXX / $AR override).
//!
//! The C sources are read from `csrc/`, inside the crate, so that the packaged crate
//! (`cargo package`) builds alone. In the repository `csrc/runtime/{include,src}` and
//! `csrc/c/{include,src}` are symlinks to `runtime/` and `bindings/c/`, the one place to
//! edit (bindings/c is generated); `cargo package` stores the files they point to.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

fn main() {
    let crate_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let csrc = crate_dir.join("csrc");
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let cxx = env::var("CXX").unwrap_or_else(|_| "c++".into());
    let ar = env::var("AR").unwrap_or_else(|_| "ar".into());
    let opt_level = env::var("OPT_LEVEL").unwrap_or_else(|_| "0".into());

    let source_dirs = [
        ("runtime", csrc.join("runtime/src")),
        ("bindings_c", csrc.join("c/src")),
    ];
    let include_dirs = [csrc.join("runtime/include"), csrc.join("c/include")];
    for dir in source_dirs.iter().map(|(_, d)| d).chain(&include_dirs) {
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=CXX");
    println!("cargo:rerun-if-env-changed=AR");
    println!("cargo:rerun-if-env-changed=CFLAGS");

    let mut compiles: Vec<(PathBuf, Child)> = Vec::new();
    let mut objects = Vec::new();
    for (prefix, dir) in &source_dirs {
        for source in c_sources(dir) {
            let stem = source.file_stem().unwrap().to_string_lossy().into_owned();
            let object = out_dir.join(format!("{prefix}_{stem}.o"));
            let cpp = source.extension().is_some_and(|ext| ext == "cc");
            let mut command = Command::new(if cpp { &cxx } else { &cc });
            command
                .arg(if cpp { "-std=c++17" } else { "-std=c11" })
                .args(["-fPIC", "-g", "-Wall", "-Wextra"])
                .arg(format!("-O{opt_level}"));
            for include in &include_dirs {
                command.arg("-I").arg(include);
            }
            if let Ok(flags) = env::var("CFLAGS") {
                command.args(flags.split_whitespace());
            }
            command.arg("-c").arg(&source).arg("-o").arg(&object);
            let child = command
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", if cpp { &cxx } else { &cc }));
            compiles.push((source, child));
            objects.push(object);
        }
    }
    for (source, mut child) in compiles {
        let status = child.wait().expect("waiting for the C compiler");
        assert!(status.success(), "compiling {} failed", source.display());
    }

    let archive = out_dir.join("libncclbind_c.a");
    let _ = std::fs::remove_file(&archive);
    let status = Command::new(&ar)
        .arg("crs")
        .arg(&archive)
        .args(&objects)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {ar}: {e}"));
    assert!(status.success(), "{ar} failed");

    println!("cargo:rustc-link-search=native={}", out_dir.display());
    println!("cargo:rustc-link-lib=static=ncclbind_c");
    println!("cargo:rustc-link-lib=dylib=dl");
    println!("cargo:rustc-link-lib=dylib=pthread");
    println!("cargo:rustc-link-lib=dylib=stdc++");
}

/// The .c and .cc files of dir, sorted so that the archive is the same on every build.
fn c_sources(dir: &Path) -> Vec<PathBuf> {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    let mut sources: Vec<PathBuf> = entries
        .map(|entry| entry.expect("reading a directory entry").path())
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| ext == "c" || ext == "cc")
        })
        .collect();
    sources.sort();
    sources
}
