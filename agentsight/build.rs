//! Builds the kernel programs (agentsight-ebpf) with aya-build so the binary
//! embeds them: one file to install.
use std::{env, fs, path::PathBuf};

fn main() -> anyhow::Result<()> {
    let out_dir =
        PathBuf::from(env::var_os("OUT_DIR").ok_or_else(|| anyhow::anyhow!("OUT_DIR not set"))?);
    let object = out_dir.join("agentsight");
    let skip = env::var("AYA_BUILD_SKIP").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
    if skip {
        // Parser-only builds: an empty object, rejected with a clear error at load time.
        if !object.exists() {
            fs::write(&object, [])?;
        }
        println!("cargo:rerun-if-env-changed=AYA_BUILD_SKIP");
        return Ok(());
    }
    let manifest = env::var("CARGO_MANIFEST_DIR")?;
    let root_dir = PathBuf::from(manifest)
        .parent()
        .ok_or_else(|| anyhow::anyhow!("agentsight crate has no parent directory"))?
        .join("agentsight-ebpf");
    let root_dir = root_dir
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("non-UTF-8 path {}", root_dir.display()))?
        .to_owned();
    let channel = pinned_channel(&PathBuf::from(&root_dir).join("rust-toolchain.toml"))?;
    aya_build::build_ebpf(
        [aya_build::Package {
            name: "agentsight-ebpf",
            root_dir: &root_dir,
            ..Default::default()
        }],
        aya_build::Toolchain::Custom(&channel),
    )
}

/// The pinned nightly that builds the kernel programs: the `channel` of
/// agentsight-ebpf/rust-toolchain.toml, the one place that names it (a
/// floating `nightly` would change LLVM under bpf-linker without notice).
fn pinned_channel(file: &std::path::Path) -> anyhow::Result<String> {
    println!("cargo:rerun-if-changed={}", file.display());
    let text = fs::read_to_string(file)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
    let doc: toml::Table =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    doc.get("toolchain")
        .and_then(|t| t.get("channel"))
        .and_then(|c| c.as_str())
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("{}: no [toolchain] channel", file.display()))
}
